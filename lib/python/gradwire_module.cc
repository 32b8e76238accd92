// _gradwire: the Python extension over gradwire's C++ API (pybind11).
//
// Deliberately independent of PyTorch's C++ ABI: buffers arrive through
// the Python buffer protocol (numpy arrays, memoryviews, torch's
// tensor.numpy()) or as a raw (data_ptr, numel) pair, so one build works
// with any torch version and with none. The Python package around it
// (lib/python/gradwire/) adds the DDP communication hook. The data
// cache (DataCache, Prefetcher, pack_dataset) is another extension,
// _gradwire_data (gradwire_data_module.cc): lib/cache links gRPC, which a
// training process that only exchanges gradients should not load.
//
// Every call that can block on the network (Connect, allreduce_mean,
// close) releases the GIL, so other Python threads (data loading, the
// autograd engine's) keep running during an exchange. Errors become
// Python exceptions: InvalidArgument -> ValueError, everything else ->
// gradwire.Error (a RuntimeError) whose message starts with the status
// code ("UNAVAILABLE: ...").
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"
#include "exchange_cost_binding.h"
#include "status_exception.h"

namespace py = pybind11;

namespace gradwire {
namespace {

using python::Check;
using python::Value;

// A writable, C-contiguous float32 buffer. The buffer_info keeps the
// Py_buffer (and so the memory) alive while the GIL is released.
struct FloatBuffer {
  py::buffer_info info;
  absl::Span<float> span() {
    return absl::MakeSpan(static_cast<float*>(info.ptr), static_cast<size_t>(info.size));
  }
};

FloatBuffer RequireFloats(const py::buffer& buffer, bool writable, const char* what) {
  py::buffer_info info = buffer.request(writable);
  if (info.itemsize != sizeof(float) || info.format != py::format_descriptor<float>::format()) {
    throw py::value_error(absl::StrCat(what, " must hold float32 (format 'f'), got format '",
                                       info.format, "' of ", info.itemsize, "-byte items"));
  }
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expected) {
      throw py::value_error(absl::StrCat(what, " must be C-contiguous"));
    }
    expected *= info.shape[d];
  }
  return FloatBuffer{std::move(info)};
}

// copy_residual's body: `residual` (empty: none yet) into `out`, which
// must have its length. False, leaving out alone, when there is none.
bool CopyResidualInto(absl::Span<const float> residual, uint32_t bucket,
                      const py::buffer& out_buffer) {
  FloatBuffer out = RequireFloats(out_buffer, /*writable=*/true, "out");
  if (residual.empty()) return false;
  if (static_cast<size_t>(out.info.size) != residual.size()) {
    throw py::value_error(absl::StrCat("bucket ", bucket, "'s residual has ", residual.size(),
                                       " elements, out has ", out.info.size));
  }
  std::copy(residual.begin(), residual.end(), out.span().begin());
  return true;
}

std::optional<ExchangePath> ParsePath(const std::optional<std::string>& path) {
  if (!path.has_value() || path->empty() || *path == "auto") return std::nullopt;
  if (*path == "dense") return ExchangePath::kDense;
  if (*path == "compressed") return ExchangePath::kCompressed;
  throw py::value_error(
      absl::StrCat("path must be 'dense', 'compressed' or None (the size/1-D rule), got '",
                   *path, "'"));
}

// The path rule of a spec and the dense settings (Communicator's), for the
// module-level path_for and bucket_plan, which need no communicator.
PathRule RuleFor(const std::string& spec, uint64_t dense_below_elements,
                 bool dense_one_dimensional) {
  CommunicatorOptions options;
  options.compression = Value(CompressionSpec::Parse(spec));
  options.dense_below_elements = dense_below_elements;
  options.dense_one_dimensional = dense_one_dimensional;
  return Communicator::PathRuleFor(options);
}

// bucket_plan: BucketPlan over tensors given by shape, in submission
// order; each bucket as a dict, its tensors as their positions in `shapes`.
py::list BucketPlanOf(const std::string& spec, const std::vector<std::vector<int64_t>>& shapes,
                      uint64_t bucket_bytes, uint64_t dense_below_elements,
                      bool dense_one_dimensional) {
  if (bucket_bytes == 0) throw py::value_error("bucket_bytes must be positive");
  BucketPlan plan(RuleFor(spec, dense_below_elements, dense_one_dimensional), bucket_bytes);
  std::vector<py::list> tensors;  // per bucket: positions in shapes, in fusion order
  for (size_t i = 0; i < shapes.size(); ++i) {
    uint64_t elements = 1;
    for (int64_t d : shapes[i]) {
      if (d < 0) {
        throw py::value_error(absl::StrCat("shape number ", i, " has a negative dimension"));
      }
      elements *= static_cast<uint64_t>(d);
    }
    const uint32_t bucket = Value(plan.Add(absl::StrCat(i), elements, shapes[i])).place.bucket;
    if (bucket == tensors.size()) tensors.emplace_back();
    tensors[bucket].append(i);
  }
  plan.Fix();
  py::list out;
  for (uint32_t id = 0; id < plan.bucket_count(); ++id) {
    const PlannedBucket& b = plan.bucket(id);
    py::dict d;
    d["id"] = b.id;
    d["path"] = ExchangePathName(b.path);
    d["elements"] = b.elements;
    d["tensors"] = tensors[id];
    out.append(d);
  }
  return out;
}

py::dict StatsDict(const ExchangeStats& s) {
  py::dict d;
  d["dense_buckets"] = s.dense_buckets;
  d["compressed_buckets"] = s.compressed_buckets;
  d["elements"] = s.elements;
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["intra_node_bytes_sent"] = s.intra_node_bytes_sent;
  d["intra_node_bytes_received"] = s.intra_node_bytes_received;
  d["compress_s"] = absl::ToDoubleSeconds(s.compress_time);
  d["auth_s"] = absl::ToDoubleSeconds(s.auth_time);
  d["wire_s"] = absl::ToDoubleSeconds(s.wire_time);
  d["sync_s"] = absl::ToDoubleSeconds(s.sync_time);
  d["wait_s"] = absl::ToDoubleSeconds(s.wait_time);
  return d;
}

JobSecret ResolveSecret(const py::object& secret) {
  if (secret.is_none()) return Value(JobSecret::FromEnvironment());
  std::string bytes;
  if (py::isinstance<py::bytes>(secret)) {
    bytes = secret.cast<std::string>();
  } else if (py::isinstance<py::str>(secret)) {
    bytes = secret.cast<std::string>();
  } else {
    throw py::type_error("secret must be str, bytes or None ($GRADWIRE_JOB_SECRET)");
  }
  return Value(JobSecret::FromValue(bytes, "secret argument"));
}

// A Communicator joined from the environment (rendezvous_config.h).
class PyCommunicator {
 public:
  PyCommunicator(const std::string& spec, const py::object& secret, bool hierarchical,
                 uint64_t dense_below_elements, bool dense_one_dimensional, double timeout_s,
                 const std::string& dense_algorithm, const std::string& job_suffix,
                 bool emulate_nodes, int event_loop_nice) {
    CommunicatorOptions options;
    options.event_loop_nice = event_loop_nice;
    options.compression = Value(CompressionSpec::Parse(spec));
    options.hierarchical = hierarchical;
    options.dense_below_elements = dense_below_elements;
    options.dense_one_dimensional = dense_one_dimensional;
    if (dense_algorithm == "ring") {
      options.dense_algorithm = transport::AllreduceAlgorithm::kRing;
    } else if (dense_algorithm == "halving_doubling") {
      options.dense_algorithm = transport::AllreduceAlgorithm::kHalvingDoubling;
    } else {
      throw py::value_error("dense_algorithm must be 'ring' or 'halving_doubling'");
    }
    transport::RendezvousConfig explicit_values;
    if (timeout_s > 0) explicit_values.timeout = absl::Seconds(timeout_s);
    transport::RendezvousConfig config =
        Value(transport::ConfigFromEnvironment(explicit_values));
    // A second communicator in the same job (another spec) needs keys of
    // its own in the store, and frames its peers' MACs keep apart.
    config.job_id += job_suffix;
    JobSecret job_secret = ResolveSecret(secret);
    absl::StatusOr<std::unique_ptr<Communicator>> comm;
    {
      py::gil_scoped_release release;
      // Emulated nodes bind loopback, which Connect refuses for a job that
      // "spans hosts" (rightly, for real ones).
      comm = emulate_nodes ? Communicator::ConnectAt(config, "127.0.0.1", job_secret, options)
                           : Communicator::Connect(config, job_secret, options);
    }
    comm_ = Value(std::move(comm));
  }

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  std::string spec() const { return comm_->options().compression.ToString(); }

  std::string PathFor(uint64_t elements, bool one_dimensional) const {
    return ExchangePathName(comm_->PathFor(elements, one_dimensional));
  }

  std::string AllreduceMean(const py::buffer& buffer, uint32_t bucket, uint64_t step,
                            const std::optional<std::string>& path, bool one_dimensional) {
    FloatBuffer data = RequireFloats(buffer, /*writable=*/true, "buffer");
    return Run(data.span(), bucket, step, path, one_dimensional);
  }

  // Communicator::AllreduceMeanWithDense: `buffer` compressed, `dense`
  // exact, one exchange.
  void AllreduceMeanWithDense(const py::buffer& buffer, const py::buffer& dense_buffer,
                              uint32_t bucket, uint64_t step) {
    FloatBuffer data = RequireFloats(buffer, /*writable=*/true, "buffer");
    FloatBuffer dense = RequireFloats(dense_buffer, /*writable=*/true, "dense");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->AllreduceMeanWithDense(bucket, step, data.span(), dense.span());
    }
    Check(s);
  }

  // For tensors reached by address (torch: tensor.data_ptr(), numel()).
  // The caller guarantees numel float32 elements live at data_ptr, in
  // host memory, for the duration of the call.
  std::string AllreduceMeanPtr(uintptr_t data_ptr, uint64_t numel, uint32_t bucket,
                               uint64_t step, const std::optional<std::string>& path,
                               bool one_dimensional) {
    if (data_ptr == 0 && numel != 0) throw py::value_error("data_ptr is null");
    if (data_ptr % alignof(float) != 0) throw py::value_error("data_ptr is not 4-byte aligned");
    return Run(absl::MakeSpan(reinterpret_cast<float*>(data_ptr), numel), bucket, step, path,
               one_dimensional);
  }

  // Copies bucket's residual into `out` (same length) and returns true;
  // false, leaving out alone, when the bucket has no residual yet.
  bool CopyResidual(uint32_t bucket, const py::buffer& out_buffer) const {
    return CopyResidualInto(comm_->Residual(bucket), bucket, out_buffer);
  }

  py::bytes SaveState() const { return py::bytes(Value(comm_->SaveState())); }
  void RestoreState(const py::bytes& state) {
    Check(comm_->RestoreState(std::string(state)));
  }

  py::dict LastCall() const { return StatsDict(comm_->last_call()); }
  py::dict Totals() const { return StatsDict(comm_->totals()); }
  std::string Describe(bool totals) const {
    return (totals ? comm_->totals() : comm_->last_call()).ToString();
  }
  void Health() const { Check(comm_->health()); }

  void Close() {
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->Close();
    }
    Check(s);
  }

 private:
  std::string Run(absl::Span<float> data, uint32_t bucket, uint64_t step,
                  const std::optional<std::string>& path, bool one_dimensional) {
    const ExchangePath chosen = ParsePath(path).value_or(comm_->PathFor(data.size(), one_dimensional));
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = comm_->AllreduceMean(bucket, step, data, chosen);
    }
    Check(s);
    return ExchangePathName(chosen);
  }

  std::unique_ptr<Communicator> comm_;
};

// The CPU reference of a flat exchange, in one process: what every rank
// of a Communicator must compute, bit for bit (docs/communicator.md):
// compressed: each rank's ErrorFeedback::Encode of its own gradient, the
// frames decoded in rank order into zeros, then sum / P; dense: the sum
// in rank order, then / P (equal to Gloo's ring sum for two ranks, where
// every element is one addition a + b). Keeps one residual per (rank,
// bucket), like the ranks do, so it can follow a whole training run.
class ReferenceExchange {
 public:
  ReferenceExchange(const std::string& spec, int world_size) {
    if (world_size < 1) throw py::value_error("world_size must be >= 1");
    const CompressionSpec agreed = Value(CompressionSpec::Parse(spec));
    // Each rank encodes with its own sender spec (QSGD rounds with a
    // per-rank seed), exactly as a Communicator's ranks do.
    for (int r = 0; r < world_size; ++r) {
      codecs_.push_back(Value(MakeCodec(agreed.ForSender(r))));
      ef_.push_back(std::make_unique<ErrorFeedback>(*codecs_.back()));
    }
  }

  // divisor: 0 for the world size; the hierarchical exchange averages its
  // cross-node sum of node sums by the whole world size, not the number of
  // nodes (tests feed one such reference per shard, one gradient per node).
  void Average(uint32_t bucket, uint64_t step, const std::vector<py::buffer>& grads,
               const py::buffer& out_buffer, const std::string& path, double divisor_arg) {
    if (divisor_arg < 0) throw py::value_error("divisor must be >= 0 (0: the world size)");
    const size_t p = ef_.size();
    if (grads.size() != p) {
      throw py::value_error(absl::StrCat("expected ", p, " gradients (one per rank), got ",
                                         grads.size()));
    }
    FloatBuffer out = RequireFloats(out_buffer, /*writable=*/true, "out");
    std::vector<FloatBuffer> in;
    for (const py::buffer& g : grads) {
      in.push_back(RequireFloats(g, /*writable=*/false, "gradient"));
      if (in.back().info.size != out.info.size) {
        throw py::value_error("every gradient must have out's length");
      }
    }
    const size_t n = out.info.size;
    std::vector<float> sum(n, 0.0f);
    if (path == "dense") {
      for (size_t r = 0; r < p; ++r) {
        absl::Span<float> g = in[r].span();
        for (size_t i = 0; i < n; ++i) sum[i] += g[i];
      }
    } else if (path == "compressed") {
      const std::string key = absl::StrCat(bucket);
      std::vector<uint8_t> frame(codecs_[0]->MaxEncodedBytes(n));
      for (size_t r = 0; r < p; ++r) {
        EncodeStats st = Value(ef_[r]->Encode(key, in[r].span(), step, absl::MakeSpan(frame)));
        Check(codecs_[r]->DecodeAccumulate(absl::MakeConstSpan(frame.data(), st.frame_bytes),
                                           absl::MakeSpan(sum)));
      }
    } else {
      throw py::value_error("path must be 'dense' or 'compressed'");
    }
    const float divisor = divisor_arg > 0 ? static_cast<float>(divisor_arg) : static_cast<float>(p);
    absl::Span<float> o = out.span();
    for (size_t i = 0; i < n; ++i) o[i] = sum[i] / divisor;
  }

  // Rank `rank`'s residual of `bucket` into out, as Communicator's
  // copy_residual: false when it has none yet.
  bool CopyResidual(int rank, uint32_t bucket, const py::buffer& out_buffer) const {
    if (rank < 0 || static_cast<size_t>(rank) >= ef_.size()) {
      throw py::value_error(absl::StrCat("rank ", rank, " out of range"));
    }
    return CopyResidualInto(ef_[rank]->Residual(absl::StrCat(bucket)), bucket, out_buffer);
  }

  // Bytes of one rank's frame for n elements (what it sends per bucket,
  // before the MAC trailer); for reports.
  uint64_t MaxEncodedBytes(uint64_t n) const { return codecs_[0]->MaxEncodedBytes(n); }

 private:
  std::vector<std::unique_ptr<Codec>> codecs_;  // outlive ef_, which refers to them
  std::vector<std::unique_ptr<ErrorFeedback>> ef_;
};

}  // namespace
}  // namespace gradwire

PYBIND11_MODULE(_gradwire, m) {
  using namespace gradwire;
  m.doc() = "gradwire: compressed gradient exchange (C++ core; see the gradwire package)";

  gradwire::python::DefineErrorType(m);
  gradwire::python::DefineExchangeCost(m);  // exchange_cost_binding.h

  m.def(
      "canonical_spec",
      [](const std::string& spec) { return Value(CompressionSpec::Parse(spec)).ToString(); },
      py::arg("spec"), "Parses a spec string ('topk:ratio=0.01', ...); returns its canonical form.");
  m.def(
      "uses_error_feedback",
      [](const std::string& spec) { return Value(CompressionSpec::Parse(spec)).UsesErrorFeedback(); },
      py::arg("spec"));
  m.def(
      "selected_count",
      [](const std::string& spec, uint64_t n) {
        return Value(CompressionSpec::Parse(spec)).SelectedCount(n);
      },
      py::arg("spec"), py::arg("n"), "k, the values a sparse method sends for n elements.");
  m.def(
      "path_for",
      [](const std::string& spec, uint64_t elements, bool one_dimensional,
         uint64_t dense_below_elements, bool dense_one_dimensional) {
        return ExchangePathName(RuleFor(spec, dense_below_elements, dense_one_dimensional)
                                    .PathFor(elements, one_dimensional));
      },
      py::arg("spec"), py::arg("elements"), py::arg("one_dimensional") = false,
      py::arg("dense_below_elements") = 16384, py::arg("dense_one_dimensional") = true,
      R"doc('dense' or 'compressed': the library's path rule (lib/comm/bucket_plan.h).
Dense for spec 'none' (every method's settings are ignored but the method),
for fewer than dense_below_elements elements, and for 1-D tensors when
dense_one_dimensional; else compressed. Communicator.path_for is the same
rule with the communicator's settings.)doc");
  m.def("bucket_plan", &BucketPlanOf, py::arg("spec"), py::arg("shapes"),
        py::arg("bucket_bytes") = uint64_t{25} << 20, py::arg("dense_below_elements") = 16384,
        py::arg("dense_one_dimensional") = true,
        R"doc(The buckets GradientExchanger fuses tensors into (lib/comm/bucket_plan.h).
shapes: one shape (sequence of ints) per tensor, in submission (backprop)
order; each tensor's path by path_for; per path one open bucket, closed
once it holds >= bucket_bytes of float32; the rest closed at the end.
Returns [{'id', 'path' ('dense'/'compressed'), 'elements', 'tensors'
(positions in shapes, in fusion order)}] by id (the order buckets opened).)doc");

  py::class_<PyCommunicator>(m, "Communicator", R"doc(
Joins the job described by the environment (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, GRADWIRE_STORE_DIR / GRADWIRE_REDIS,
GRADWIRE_JOB_ID, GRADWIRE_IFACE, GRADWIRE_TIMEOUT_MS, or mpirun's
OMPI_COMM_WORLD_*) and averages float32 buffers across its ranks.
Collective: every rank constructs it, and calls allreduce_mean with the
same buckets, steps and lengths in the same order.
secret: str/bytes (>= 16 bytes), or None for $GRADWIRE_JOB_SECRET.
job_suffix: appended to the job id, so several communicators (e.g. of
different specs) can share one job's store.
emulate_nodes: bind 127.0.0.1 although LOCAL_WORLD_SIZE < WORLD_SIZE
(hierarchical tests with nodes emulated on one machine).
event_loop_nice: 0..19 added to the nice value of Gloo's event-loop thread,
for ranks that share a machine's cores (Gloo's loop otherwise spins while a
descheduled thread holds a socket's lock; docs/communicator.md).)doc")
        .def(py::init<const std::string&, const py::object&, bool, uint64_t, bool, double,
                    const std::string&, const std::string&, bool, int>(),
           py::arg("spec") = "none", py::arg("secret") = py::none(),
           py::arg("hierarchical") = false, py::arg("dense_below_elements") = 16384,
           py::arg("dense_one_dimensional") = true, py::arg("timeout_s") = 0.0,
           py::arg("dense_algorithm") = "ring", py::arg("job_suffix") = "",
           py::arg("emulate_nodes") = false, py::arg("event_loop_nice") = 0)
      .def_property_readonly("rank", &PyCommunicator::rank)
      .def_property_readonly("size", &PyCommunicator::size)
      .def_property_readonly("spec", &PyCommunicator::spec)
      .def("path_for", &PyCommunicator::PathFor, py::arg("elements"),
           py::arg("one_dimensional") = false,
           "'dense' or 'compressed': the path a tensor of this size takes by default.")
      .def("allreduce_mean", &PyCommunicator::AllreduceMean, py::arg("buffer"), py::arg("bucket"),
           py::arg("step"), py::arg("path") = py::none(), py::arg("one_dimensional") = false,
           R"doc(In place: buffer (writable C-contiguous float32, e.g. tensor.numpy())
becomes the average over ranks. bucket keys the error-feedback residual;
step must grow. path: 'dense', 'compressed' or None (size / 1-D rule).
Returns the path taken. Releases the GIL.)doc")
      .def("allreduce_mean_with_dense", &PyCommunicator::AllreduceMeanWithDense,
           py::arg("buffer"), py::arg("dense"), py::arg("bucket"), py::arg("step"),
           R"doc(One exchange for a mixed buffer: buffer (float32, writable) is averaged
compressed with error feedback keyed by bucket, dense (float32, writable)
travels exact in the same frames and becomes the rank-order mean. For
small dense parts: every rank receives every rank's dense. Releases the
GIL.)doc")
      .def("allreduce_mean_ptr", &PyCommunicator::AllreduceMeanPtr, py::arg("data_ptr"),
           py::arg("numel"), py::arg("bucket"), py::arg("step"), py::arg("path") = py::none(),
           py::arg("one_dimensional") = false,
           "As allreduce_mean, for numel float32 values in host memory at data_ptr.")
      .def("copy_residual", &PyCommunicator::CopyResidual, py::arg("bucket"), py::arg("out"),
           "Copies the bucket's error-feedback residual into out (float32, same length); "
           "False if it has none yet.")
      .def("save_state", &PyCommunicator::SaveState, "Error-feedback residuals as bytes.")
      .def("restore_state", &PyCommunicator::RestoreState, py::arg("state"))
      .def("last_call", &PyCommunicator::LastCall)
      .def("totals", &PyCommunicator::Totals)
      .def("describe", &PyCommunicator::Describe, py::arg("totals") = true)
      .def("health", &PyCommunicator::Health, "Raises the failure that poisoned it, if any.")
      .def("close", &PyCommunicator::Close, "Collective orderly shutdown (every rank).");

  py::class_<ReferenceExchange>(m, "ReferenceExchange",
                                "One-process CPU reference of a flat exchange (tests).")
      .def(py::init<const std::string&, int>(), py::arg("spec"), py::arg("world_size"))
      .def("average", &ReferenceExchange::Average, py::arg("bucket"), py::arg("step"),
           py::arg("grads"), py::arg("out"), py::arg("path") = "compressed",
           py::arg("divisor") = 0.0)
      .def("max_encoded_bytes", &ReferenceExchange::MaxEncodedBytes, py::arg("n"))
      .def("copy_residual", &ReferenceExchange::CopyResidual, py::arg("rank"), py::arg("bucket"),
           py::arg("out"));
}
