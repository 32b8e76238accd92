#include "communicator_binding.h"

#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bound_method.h"
#include "communicator_options.h"
#include "exchange_cost_binding.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/python/mapped_range.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"
#include "host_buffer.h"
#include "int_argument.h"
#include "join.h"
#include "python_store.h"
#include "status_exception.h"

namespace py = pybind11;
using pybind11::literals::operator""_a;  // py::dict("key"_a = value, ...)

namespace gradwire {
namespace python {
namespace {

std::optional<ExchangePath> ParsePath(const std::optional<std::string>& path) {
  if (!path.has_value() || path->empty() || *path == "auto") return std::nullopt;
  if (*path == "dense") return ExchangePath::kDense;
  if (*path == "compressed") return ExchangePath::kCompressed;
  RaiseInvalid(absl::StrCat("path must be 'dense', 'compressed' or None (the size/1-D rule), got '",
                            *path, "'"));
}

// numel float32 values at the address data_ptr (host or device memory),
// both read as integer arguments; checked here for null and alignment
// (host memory: CheckReadWritableRange, by the caller).
absl::Span<float> FloatsAt(py::handle data_ptr_arg, py::handle numel_arg) {
  const uintptr_t data_ptr = UnsignedArgument(data_ptr_arg, "data_ptr", UINTPTR_MAX);
  const uint64_t numel = UnsignedArgument(numel_arg, "numel", PTRDIFF_MAX / sizeof(float));
  if (data_ptr == 0 && numel != 0) RaiseInvalid("data_ptr is null");
  if (data_ptr % alignof(float) != 0) RaiseInvalid("data_ptr is not 4-byte aligned");
  return absl::MakeSpan(reinterpret_cast<float*>(data_ptr), numel);
}

void CheckBucket(uint32_t bucket) {
  if (bucket == kJoinBucket) {
    RaiseInvalid(absl::StrCat("bucket ", bucket, " is reserved (rendezvous tokens)"));
  }
}

py::dict StatsDict(const ExchangeStats& s) {
  return py::dict(
      "dense_buckets"_a = s.dense_buckets, "compressed_buckets"_a = s.compressed_buckets,
      "sparse_allreduce_buckets"_a = s.sparse_allreduce_buckets,
      "cast_allreduce_buckets"_a = s.cast_allreduce_buckets, "elements"_a = s.elements,
      "nonfinite"_a = s.nonfinite, "bytes_sent"_a = s.bytes_sent,
      "bytes_received"_a = s.bytes_received, "intra_node_bytes_sent"_a = s.intra_node_bytes_sent,
      "intra_node_bytes_received"_a = s.intra_node_bytes_received,
      "compress_s"_a = absl::ToDoubleSeconds(s.compress_time),
      "auth_s"_a = absl::ToDoubleSeconds(s.auth_time),
      "wire_s"_a = absl::ToDoubleSeconds(s.wire_time),
      "sync_s"_a = absl::ToDoubleSeconds(s.sync_time),
      "wait_s"_a = absl::ToDoubleSeconds(s.wait_time));
}

// One call at a time into a Communicator, which is not thread-safe (Gloo's
// ordering, the residuals): a call from a second thread while one runs
// without the GIL raises at once instead of racing it (two threads once
// produced "size table says rank 0 sends 1197 bytes but it has 1208").
class OneCaller {
 public:
  OneCaller(std::atomic<bool>* busy, const char* method) : busy_(busy) {
    if (busy_->exchange(true)) {
      RaiseInvalid(absl::StrCat("Communicator.", method,
                                ": another thread is inside this Communicator, which is not "
                                "thread-safe; call it from one thread at a time"));
    }
  }
  ~OneCaller() { busy_->store(false); }
  OneCaller(const OneCaller&) = delete;
  OneCaller& operator=(const OneCaller&) = delete;

 private:
  std::atomic<bool>* busy_;
};

// A Communicator joined through a store Python hands over (torch.distributed's:
// rank, world_size, job_id with it), or from the environment
// (rendezvous_config.h); see join.h for the checks at rendezvous.
class PyCommunicator {
 public:
  PyCommunicator(const std::string& spec, const py::object& secret, bool hierarchical,
                 const py::object& dense_below_elements, bool dense_one_dimensional,
                 double timeout_s, const std::string& dense_algorithm,
                 const std::string& job_suffix, bool emulate_nodes, int event_loop_nice,
                 const std::string& secret_file, const py::object& store, int rank, int world_size,
                 const std::string& job_id, int node_id, int local_world_size,
                 const std::string& iface, const std::string& bind_address,
                 const std::string& settings, const py::object& exchange,
                 const py::object& exchange_model) {
    const CommunicatorOptions options =
        OptionsOf(spec, hierarchical, dense_below_elements, dense_one_dimensional, timeout_s,
                  dense_algorithm, event_loop_nice, exchange, exchange_model);
    JobSecret job_secret = ResolveSecret(secret, secret_file);

    transport::RendezvousConfig config;
    config.iface = iface;
    config.bind_address = bind_address;
    if (timeout_s > 0) config.timeout = absl::Seconds(timeout_s);
    std::shared_ptr<transport::RendezvousStore> joined;
    if (store.is_none()) {
      if (rank >= 0 || world_size >= 0 || !job_id.empty()) {
        RaiseInvalid(
            "rank, world_size and job_id go with store=; without one they come from "
            "the environment");
      }
      config = Value(transport::ConfigFromEnvironment(config));
      // A second communicator in the same job (another spec) needs keys of
      // its own in the store, and frames its peers' MACs keep apart.
      config.job_id += job_suffix;
      Check(transport::Validate(config));
    } else {
      if (rank < 0 || world_size < 1 || rank >= world_size || job_id.empty()) {
        RaiseInvalid(absl::StrCat("store= needs 0 <= rank < world_size and a job_id, got rank ",
                                  rank, ", world_size ", world_size, ", job_id '", job_id, "'"));
      }
      config.rank = rank;
      config.world_size = world_size;
      config.local_world_size = local_world_size > 0 ? local_world_size : world_size;
      config.node_id = node_id >= 0 ? node_id : rank / config.local_world_size;
      config.job_id = job_id + job_suffix;
      if (config.timeout <= absl::ZeroDuration()) {
        config.timeout = transport::RendezvousConfig::kDefaultTimeout;
      }
      joined = transport::RendezvousStore::Wrap(
          std::make_shared<PythonStore>(
              store, std::chrono::milliseconds(absl::ToInt64Milliseconds(config.timeout))),
          config.job_id, config.timeout);
    }
    absl::StatusOr<std::unique_ptr<Communicator>> comm;
    {
      py::gil_scoped_release release;
      comm = Connect(config, emulate_nodes, std::move(joined), settings, job_secret, options);
    }
    comm_ = Value(std::move(comm));
  }

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  std::string spec() const { return comm_->options().compression.ToString(); }

  std::string PathFor(const py::object& elements, bool one_dimensional) const {
    return ExchangePathName(comm_->PathFor(Elements(elements), one_dimensional));
  }

  std::string ExchangeFor(const py::object& elements) const {
    return ExchangeKindName(comm_->KindFor(Elements(elements)));
  }

  // Why a compressed buffer takes its exchange: the cost model's input
  // and its estimate for each exchange the spec admits.
  py::dict ExchangeEstimatesFor(const py::object& elements) const {
    const Communicator::ModelInput in = comm_->ModelInputFor(Elements(elements));
    return py::dict(
        "exchange"_a = ExchangeFor(elements),
        "model_choice"_a = ExchangeKindName(comm_->ModelKindFor(Elements(elements))),
        "rule"_a = ExchangeChoiceRule(comm_->options().compression),
        "forced"_a = comm_->options().exchange.has_value(), "ranks"_a = in.ranks,
        "elements"_a = in.elements,
        "estimates"_a = ExchangeEstimates(in.ranks, in.elements, comm_->options().compression,
                                          comm_->exchange_model()));
  }

  py::dict ExchangeModelOf() const { return ExchangeModelDict(comm_->exchange_model()); }

  std::string AllreduceMean(const py::object& buffer, const py::object& bucket,
                            const py::object& step, const std::optional<std::string>& path,
                            bool one_dimensional) {
    const uint32_t b = BucketArgument(bucket);
    const uint64_t t = StepArgument(step);
    HostFloats data = HostFloats::From(buffer, /*writable=*/true, "buffer");
    return Run(data, b, t, path, one_dimensional);
  }

  // Communicator::AllreduceMeanWithDense: `buffer` compressed, `dense`
  // exact, one exchange.
  void AllreduceMeanWithDense(const py::object& buffer, const py::object& dense_buffer,
                              const py::object& bucket_arg, const py::object& step_arg) {
    const uint32_t bucket = BucketArgument(bucket_arg);
    const uint64_t step = StepArgument(step_arg);
    CheckBucket(bucket);
    OneCaller one(&busy_, "allreduce_mean_with_dense");
    HostFloats data = HostFloats::From(buffer, /*writable=*/true, "buffer");
    HostFloats dense = HostFloats::From(dense_buffer, /*writable=*/true, "dense");
    if (data.Overlaps(dense)) {
      RaiseInvalid(
          "allreduce_mean_with_dense: buffer and dense share memory (one tensor, or "
          "views of one); pass two separate buffers");
    }
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->AllreduceMeanWithDense(bucket, step, data.floats(), dense.floats());
      if (s.ok()) {
        data.WriteBack();
        dense.WriteBack();
      }
    }
    Check(s);
  }

  // For float32 host memory reached by address (tensor.data_ptr(),
  // numel()): refused unless all of it is mapped readable and writable in
  // this process (mapped_range.h); that it stays so for the duration of
  // the call is the caller's to guarantee.
  std::string AllreduceMeanPtr(const py::object& data_ptr_arg, const py::object& numel_arg,
                               const py::object& bucket, const py::object& step,
                               const std::optional<std::string>& path, bool one_dimensional) {
    const absl::Span<float> data = FloatsAt(data_ptr_arg, numel_arg);
    if (absl::Status mapped = CheckReadWritableRange(reinterpret_cast<uintptr_t>(data.data()),
                                                     data.size() * sizeof(float));
        !mapped.ok()) {
      Check(absl::Status(mapped.code(),
                         absl::StrCat("allreduce_mean_ptr: data_ptr: ", mapped.message())));
    }
    return Exchange(data, BucketArgument(bucket), StepArgument(step), path, one_dimensional,
                    nullptr);
  }

  // The device path (Communicator::AllreduceMeanOnDevice; from Python not
  // yet run on a GPU): numel float32 values of CUDA memory at data_ptr, ordered
  // on the CUDA stream `stream` (torch.cuda.Stream.cuda_stream; 0 is the
  // default stream).
  std::string AllreduceMeanDevice(const py::object& data_ptr_arg, const py::object& numel_arg,
                                  const py::object& bucket_arg, const py::object& step_arg,
                                  const py::object& stream_arg,
                                  const std::optional<std::string>& path, bool one_dimensional) {
    const absl::Span<float> data = FloatsAt(data_ptr_arg, numel_arg);
    const uint32_t bucket = BucketArgument(bucket_arg);
    const uint64_t step = StepArgument(step_arg);
    const uintptr_t stream = UnsignedArgument(stream_arg, "stream", UINTPTR_MAX);
    CheckBucket(bucket);
    OneCaller one(&busy_, "allreduce_mean_device");
    const ExchangePath chosen =
        ParsePath(path).value_or(comm_->PathFor(data.size(), one_dimensional));
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->AllreduceMeanOnDevice(bucket, step, data, chosen,
                                       reinterpret_cast<kernels::cuda::Stream>(stream));
    }
    Check(s);
    return ExchangePathName(chosen);
  }

  bool CopyResidual(const py::object& bucket_arg, const py::object& out) {
    const uint32_t bucket = BucketArgument(bucket_arg);
    OneCaller one(&busy_, "copy_residual");
    absl::Span<const float> residual = comm_->Residual(bucket);
    if (kernels::Locate(residual.data()) == kernels::Location::kDevice) {
      RaiseInvalid("copy_residual: the bucket's residual is in device memory (device path)");
    }
    if (residual.empty()) {
      HostFloats::From(out, /*writable=*/true, "out");  // still checks the argument
      return false;
    }
    CopyInto(residual, out, "out");
    return true;
  }

  py::bytes SaveState() {
    OneCaller one(&busy_, "save_state");
    return py::bytes(Value(comm_->SaveState()));
  }
  void RestoreState(const py::bytes& state) {
    OneCaller one(&busy_, "restore_state");
    Check(comm_->RestoreState(std::string(state)));
  }

  void DivideResiduals(double divisor) {
    OneCaller one(&busy_, "divide_residuals");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->DivideResiduals(static_cast<float>(divisor));
    }
    Check(s);
  }

  py::dict LastCall() const { return StatsDict(comm_->last_call()); }
  py::dict Totals() const { return StatsDict(comm_->totals()); }
  std::string Describe(bool totals) const {
    return (totals ? comm_->totals() : comm_->last_call()).ToString();
  }
  void Health() const { Check(comm_->health()); }

  void Close() {
    OneCaller one(&busy_, "close");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->Close();
    }
    Check(s);
  }

 private:
  // Rendezvous: the environment's store (opened here: Redis may block) or
  // the given one, the bind address, then Join. No GIL.
  static absl::StatusOr<std::unique_ptr<Communicator>> Connect(
      const transport::RendezvousConfig& config, bool emulate_nodes,
      std::shared_ptr<transport::RendezvousStore> store, const std::string& settings,
      const JobSecret& secret, const CommunicatorOptions& options) {
    if (store == nullptr) {
      absl::StatusOr<std::shared_ptr<transport::RendezvousStore>> opened =
          transport::RendezvousStore::Open(config);
      if (!opened.ok()) return opened.status();
      store = *std::move(opened);
    }
    // Emulated nodes bind loopback, which ResolveBindAddress refuses for
    // a job that "spans hosts" (rightly, for real ones).
    std::string bind_address = "127.0.0.1";
    if (!emulate_nodes) {
      absl::StatusOr<std::string> address = transport::ResolveBindAddress(config);
      if (!address.ok()) return address.status();
      bind_address = *std::move(address);
    }
    return Join(std::move(store), config, bind_address, settings, secret, options);
  }

  std::string Run(HostFloats& data, uint32_t bucket, uint64_t step,
                  const std::optional<std::string>& path, bool one_dimensional) {
    return Exchange(data.floats(), bucket, step, path, one_dimensional, &data);
  }

  std::string Exchange(absl::Span<float> data, uint32_t bucket, uint64_t step,
                       const std::optional<std::string>& path, bool one_dimensional,
                       HostFloats* write_back) {
    CheckBucket(bucket);
    OneCaller one(&busy_, "allreduce_mean");
    const ExchangePath chosen =
        ParsePath(path).value_or(comm_->PathFor(data.size(), one_dimensional));
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->AllreduceMean(bucket, step, data, chosen);
      if (s.ok() && write_back != nullptr) write_back->WriteBack();
    }
    Check(s);
    return ExchangePathName(chosen);
  }

  static uint64_t Elements(py::handle elements) {
    return UnsignedArgument(elements, "elements", UINT64_MAX);
  }

  std::unique_ptr<Communicator> comm_;
  std::atomic<bool> busy_{false};  // OneCaller's
};

}  // namespace

void DefineCommunicator(py::module_& m) {
  m.def("_check_communicator_arguments", &CheckCommunicatorArguments, py::arg("spec") = "none",
        py::arg("secret") = py::none(), py::arg("hierarchical") = false,
        py::arg("dense_below_elements") = 16384, py::arg("dense_one_dimensional") = true,
        py::arg("timeout_s") = 0.0, py::arg("dense_algorithm") = "ring", py::arg("job_suffix") = "",
        py::arg("emulate_nodes") = false, py::arg("event_loop_nice") = 0,
        py::arg("secret_file") = "", py::arg("iface") = "", py::arg("bind_address") = "",
        py::arg("settings") = "", py::arg("exchange") = "auto",
        py::arg("exchange_model") = py::none(),
        "Communicator()'s checks of its own arguments, joining nobody (its defaults).");
  py::class_<PyCommunicator>(m, "Communicator", R"doc(
Averages buffers across the ranks of a job (the C++ Communicator).
Collective: every rank constructs it, and calls allreduce_mean with the
same buckets, steps and lengths in the same order. Use gradwire.Communicator
(the package's class): it adds typed spec arguments and torch.distributed
process groups.

Rendezvous: through store= (an object with set(key, bytes), get(key) ->
bytes, wait(keys, timeout_s); with rank, world_size, job_id and optionally
node_id, local_world_size), else from the environment (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, GRADWIRE_STORE_DIR /
GRADWIRE_REDIS, GRADWIRE_JOB_ID, GRADWIRE_IFACE, GRADWIRE_TIMEOUT_MS, or
mpirun's OMPI_COMM_WORLD_*). Then every rank checks, together, that all
hold the same secret and settings (spec, hierarchy, dense rule, and the
settings= string): a mismatch raises MismatchError on every rank.
secret: str/bytes (>= 16 bytes), else secret_file=, $GRADWIRE_JOB_SECRET,
$GRADWIRE_JOB_SECRET_FILE.
job_suffix: appended to the job id (several communicators in one job).
emulate_nodes: bind 127.0.0.1 although the job spans "hosts" (tests).
event_loop_nice: 0..19 added to the nice value of Gloo's event-loop thread.
exchange: how compressed buffers travel: 'auto' (the cost model picks per
buffer, exchange_estimates says why), 'allgather', 'sparse_allreduce'
(sparse specs only) or 'dense' (the ring, no compression).
exchange_model: what 'auto' predicts with: None (EXCHANGE_MODEL_DEFAULTS,
a 10 Gbit/s link), a dict of some of its keys (e.g. {'bytes_per_second':
1.25e8} for 1 Gbit/s; the rest default), the same as a str
('bytes_per_second=1.25e8', the tools' --exchange_model form) or 'measure'
(the link, a round and this spec's codec, measured at construction, ~1 MB
a rank). Each
figure the ranks use is the slowest rank's (the exchange_model property).
Buffers: torch tensors and other DLPack producers, numpy arrays and the
buffer protocol; float32 in place, float16/bfloat16 widened and rounded
back (host_buffer.h); CUDA tensors are refused (UnsupportedError).)doc")
      .def(py::init<const std::string&, const py::object&, bool, const py::object&, bool, double,
                    const std::string&, const std::string&, bool, int, const std::string&,
                    const py::object&, int, int, const std::string&, int, int, const std::string&,
                    const std::string&, const std::string&, const py::object&, const py::object&>(),
           py::arg("spec") = "none", py::arg("secret") = py::none(),
           py::arg("hierarchical") = false, py::arg("dense_below_elements") = 16384,
           py::arg("dense_one_dimensional") = true, py::arg("timeout_s") = 0.0,
           py::arg("dense_algorithm") = "ring", py::arg("job_suffix") = "",
           py::arg("emulate_nodes") = false, py::arg("event_loop_nice") = 0,
           py::arg("secret_file") = "", py::arg("store") = py::none(), py::arg("rank") = -1,
           py::arg("world_size") = -1, py::arg("job_id") = "", py::arg("node_id") = -1,
           py::arg("local_world_size") = -1, py::arg("iface") = "", py::arg("bind_address") = "",
           py::arg("settings") = "", py::arg("exchange") = "auto",
           py::arg("exchange_model") = py::none())
      .def_property_readonly("rank", python::Bound(&PyCommunicator::rank))
      .def_property_readonly("size", python::Bound(&PyCommunicator::size))
      .def_property_readonly("spec", python::Bound(&PyCommunicator::spec))
      .def("path_for", python::Bound(&PyCommunicator::PathFor), py::arg("elements"),
           py::arg("one_dimensional") = false,
           "'dense' or 'compressed': the path a tensor of this size takes by default.")
      .def_property_readonly("exchange_model", python::Bound(&PyCommunicator::ExchangeModelOf),
                             "The cost model the ranks agreed on (EXCHANGE_MODEL_DEFAULTS' keys).")
      .def("exchange_for", python::Bound(&PyCommunicator::ExchangeFor), py::arg("elements"),
           "'dense_ring', 'sparse_allgather' or 'sparse_allreduce': the exchange a "
           "compressed buffer of this size takes.")
      .def("exchange_estimates", python::Bound(&PyCommunicator::ExchangeEstimatesFor),
           py::arg("elements"),
           R"doc(Why a compressed buffer of this size takes its exchange: {'exchange',
'model_choice' (the cost model's pick), 'rule' (how it picks for this spec: the smallest predicted
time, or bytes alone), 'forced' (exchange= chose it), 'ranks' and 'elements' (what
the model weighs: hierarchical, the cross-node group and one node shard),
'estimates': {kind: exchange_cost's dict} for each kind the spec admits}.)doc")
      .def("allreduce_mean", python::Bound(&PyCommunicator::AllreduceMean), py::arg("buffer"),
           py::arg("bucket"), py::arg("step"), py::arg("path") = py::none(),
           py::arg("one_dimensional") = false,
           R"doc(In place: buffer (a contiguous CPU tensor or array of float32, float16
or bfloat16) becomes the average over ranks. bucket keys the
error-feedback residual; step must grow. path: 'dense', 'compressed' or
None (size / 1-D rule). Returns the path taken. Releases the GIL.)doc")
      .def("allreduce_mean_with_dense", python::Bound(&PyCommunicator::AllreduceMeanWithDense),
           py::arg("buffer"), py::arg("dense"), py::arg("bucket"), py::arg("step"),
           R"doc(One exchange for a mixed buffer: buffer is averaged compressed with
error feedback keyed by bucket, dense travels exact in the same frames and
becomes the rank-order mean. For small dense parts: every rank receives
every rank's dense. Releases the GIL.)doc")
      .def("allreduce_mean_ptr", python::Bound(&PyCommunicator::AllreduceMeanPtr),
           py::arg("data_ptr"), py::arg("numel"), py::arg("bucket"), py::arg("step"),
           py::arg("path") = py::none(), py::arg("one_dimensional") = false,
           "As allreduce_mean, for numel float32 values in host memory at data_ptr. The "
           "address is refused (InvalidArgumentError) unless all numel floats lie in memory "
           "this process may read and write; that they are the caller's data, alive for the "
           "call, cannot be checked. Prefer allreduce_mean with a tensor or array.")
      .def(
          "allreduce_mean_device", python::Bound(&PyCommunicator::AllreduceMeanDevice),
          py::arg("data_ptr"), py::arg("numel"), py::arg("bucket"), py::arg("step"),
          py::arg("stream"), py::arg("path") = py::none(), py::arg("one_dimensional") = false,
          "As allreduce_mean, for numel float32 values in CUDA memory at data_ptr, ordered "
          "on the CUDA stream handle `stream` (the device path; from Python not yet run on a GPU). "
          "Refused (InvalidArgumentError) unless all numel floats lie in device memory (the "
          "driver's allocation ranges). Returns once the frames are back on the device; the "
          "decode runs on the stream.")
      .def("copy_residual", python::Bound(&PyCommunicator::CopyResidual), py::arg("bucket"),
           py::arg("out"),
           "Copies the bucket's error-feedback residual into out (same length); "
           "False if it has none yet.")
      .def("save_state", python::Bound(&PyCommunicator::SaveState),
           "Error-feedback residuals as bytes.")
      .def("restore_state", python::Bound(&PyCommunicator::RestoreState), py::arg("state"))
      .def("divide_residuals", python::Bound(&PyCommunicator::DivideResiduals), py::arg("divisor"),
           "Divides this rank's error-feedback residuals by divisor (finite, > 0): after a "
           "loss scale changed from S to S', divisor S / S' (exact for powers of two). Every "
           "rank alike, before its next exchange.")
      .def("last_call", python::Bound(&PyCommunicator::LastCall))
      .def("totals", python::Bound(&PyCommunicator::Totals))
      .def("describe", python::Bound(&PyCommunicator::Describe), py::arg("totals") = true)
      .def("health", python::Bound(&PyCommunicator::Health),
           "Raises the failure that poisoned it, if any.")
      .def("close", python::Bound(&PyCommunicator::Close),
           "Collective orderly shutdown (every rank).");
}

}  // namespace python
}  // namespace gradwire
