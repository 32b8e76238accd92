#include "reference_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "bound_method.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "host_buffer.h"
#include "int_argument.h"
#include "status_exception.h"

namespace py = pybind11;

namespace gradwire {
namespace python {
namespace {

// The CPU reference of a flat exchange, in one process: what every rank
// of a Communicator must compute, bit for bit (docs/communicator.md):
// compressed: each rank's ErrorFeedback::Encode of its own gradient, the
// frames decoded in rank order into zeros, then sum / P; dense: the sum
// in rank order, then / P (equal to the ring's sum for two ranks, where
// every element is one addition a + b). Keeps one residual per (rank,
// bucket), like the ranks do, so it can follow a whole training run.
// float16/bfloat16 buffers are widened and rounded back as the
// Communicator does (host_buffer.h).
class ReferenceExchange {
 public:
  ReferenceExchange(const std::string& spec, int world_size) {
    if (world_size < 1) RaiseInvalid("world_size must be >= 1");
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
  void Average(const py::object& bucket_arg, const py::object& step_arg,
               const std::vector<py::object>& grads, const py::object& out_buffer,
               const std::string& path, double divisor_arg) {
    const uint32_t bucket = BucketArgument(bucket_arg);
    const uint64_t step = StepArgument(step_arg);
    if (!(divisor_arg >= 0)) RaiseInvalid("divisor must be >= 0 (0: the world size)");
    const size_t p = ef_.size();
    if (grads.size() != p) {
      RaiseInvalid(absl::StrCat("expected ", p, " gradients (one per rank), got ", grads.size()));
    }
    HostFloats out = HostFloats::From(out_buffer, /*writable=*/true, "out");
    std::vector<HostFloats> in;
    for (const py::object& g : grads) {
      in.push_back(HostFloats::From(g, /*writable=*/false, "gradient"));
      if (in.back().size() != out.size()) RaiseInvalid("every gradient must have out's length");
    }
    const size_t n = out.size();
    std::vector<float> sum(n, 0.0f);
    if (path == "dense") {
      for (size_t r = 0; r < p; ++r) {
        absl::Span<float> g = in[r].floats();
        for (size_t i = 0; i < n; ++i) sum[i] += g[i];
      }
    } else if (path == "compressed") {
      const std::string key = absl::StrCat(bucket);
      std::vector<uint8_t> frame(codecs_[0]->MaxEncodedBytes(n));
      for (size_t r = 0; r < p; ++r) {
        EncodeStats st = Value(ef_[r]->Encode(key, in[r].floats(), step, absl::MakeSpan(frame)));
        Check(codecs_[r]->DecodeAccumulate(absl::MakeConstSpan(frame.data(), st.frame_bytes),
                                           absl::MakeSpan(sum)));
      }
    } else {
      RaiseInvalid("path must be 'dense' or 'compressed'");
    }
    const float divisor = divisor_arg > 0 ? static_cast<float>(divisor_arg) : static_cast<float>(p);
    absl::Span<float> o = out.floats();
    for (size_t i = 0; i < n; ++i) o[i] = sum[i] / divisor;
    out.WriteBack();
  }

  // Rank `rank`'s residual of `bucket` into out, as Communicator's
  // copy_residual: false when it has none yet.
  bool CopyResidual(int rank, const py::object& bucket_arg, const py::object& out) const {
    const uint32_t bucket = BucketArgument(bucket_arg);
    if (rank < 0 || static_cast<size_t>(rank) >= ef_.size()) {
      RaiseInvalid(absl::StrCat("rank ", rank, " out of range"));
    }
    absl::Span<const float> residual = ef_[rank]->Residual(absl::StrCat(bucket));
    if (residual.empty()) return false;
    CopyInto(residual, out, "out");
    return true;
  }

  // Bytes of one rank's frame for n elements (what it sends per bucket,
  // before the MAC trailer); for reports.
  uint64_t MaxEncodedBytes(uint64_t n) const {
    // Beyond 2^40 elements the bound itself would overflow 64 bits.
    if (n > (uint64_t{1} << 40)) RaiseInvalid(absl::StrCat("n must be at most 2^40, got ", n));
    return codecs_[0]->MaxEncodedBytes(n);
  }

 private:
  std::vector<std::unique_ptr<Codec>> codecs_;  // outlive ef_, which refers to them
  std::vector<std::unique_ptr<ErrorFeedback>> ef_;
};

}  // namespace

void DefineReferenceExchange(py::module_& m) {
  py::class_<ReferenceExchange>(m, "ReferenceExchange",
                                "One-process CPU reference of a flat exchange (tests).")
      .def(py::init<const std::string&, int>(), py::arg("spec"), py::arg("world_size"))
      .def("average", python::Bound(&ReferenceExchange::Average), py::arg("bucket"),
           py::arg("step"), py::arg("grads"), py::arg("out"), py::arg("path") = "compressed",
           py::arg("divisor") = 0.0)
      .def("max_encoded_bytes", python::Bound(&ReferenceExchange::MaxEncodedBytes), py::arg("n"))
      .def("copy_residual", python::Bound(&ReferenceExchange::CopyResidual), py::arg("rank"),
           py::arg("bucket"), py::arg("out"));
}

}  // namespace python
}  // namespace gradwire
