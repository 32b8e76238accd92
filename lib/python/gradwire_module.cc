// _gradwire: the Python extension over gradwire's C++ API (pybind11).
//
// Deliberately independent of PyTorch's C++ ABI: tensors arrive through
// DLPack or the buffer protocol (host_buffer.h), or as a raw (data_ptr,
// numel) pair, so one build works with any torch version and with none.
// The Python package around it (lib/python/gradwire/) adds typed spec
// arguments, torch.distributed rendezvous and the DDP communication hook.
// The data cache is another extension, _gradwire_data
// (gradwire_data_module.cc): lib/cache links gRPC, which a training
// process that only exchanges gradients should not load.
//
// Here: the spec helpers, the path rule and bucket plan, the error
// classes (status_exception.h), the Communicator (communicator_binding.h)
// and the reference exchange (reference_binding.h). Every call that can
// block on the network releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "communicator_binding.h"
#include "exchange_cost_binding.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/comm/bucket_plan.h"
#include "gradwire/lib/comm/communicator.h"
#include "int_argument.h"
#include "reference_binding.h"
#include "status_exception.h"

namespace py = pybind11;
using pybind11::literals::operator""_a;  // py::dict("key"_a = value, ...)

namespace gradwire {
namespace {

using python::RaiseInvalid;
using python::UnsignedArgument;
using python::Value;

// A spec string parsed, or the Python error CompressionSpec::Parse's
// status maps to.
CompressionSpec SpecOf(const std::string& text) { return Value(CompressionSpec::Parse(text)); }

// The path rule of a spec and the dense settings (Communicator's), for the
// module-level path_for and bucket_plan, which need no communicator.
PathRule RuleFor(const std::string& spec, uint64_t dense_below_elements,
                 bool dense_one_dimensional) {
  CommunicatorOptions options;
  options.compression = SpecOf(spec);
  options.dense_below_elements = dense_below_elements;
  options.dense_one_dimensional = dense_one_dimensional;
  return Communicator::PathRuleFor(options);
}

// bucket_plan: BucketPlan over tensors given by shape, in submission
// order; each bucket as a dict, its tensors as their positions in `shapes`.
py::list BucketPlanOf(const std::string& spec, const std::vector<std::vector<int64_t>>& shapes,
                      const py::object& bucket_bytes_arg, const py::object& dense_below_elements,
                      bool dense_one_dimensional) {
  const uint64_t bucket_bytes = UnsignedArgument(bucket_bytes_arg, "bucket_bytes", UINT64_MAX);
  if (bucket_bytes == 0) RaiseInvalid("bucket_bytes must be positive");
  BucketPlan plan(
      RuleFor(spec, UnsignedArgument(dense_below_elements, "dense_below_elements", UINT64_MAX),
              dense_one_dimensional),
      bucket_bytes);
  std::vector<py::list> tensors;  // per bucket: positions in shapes, in fusion order
  for (size_t i = 0; i < shapes.size(); ++i) {
    uint64_t elements = 1;
    for (int64_t d : shapes[i]) {
      if (d < 0) {
        RaiseInvalid(absl::StrCat("shape number ", i, " has a negative dimension"));
      }
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
        RaiseInvalid(absl::StrCat("shape number ", i, " holds 2^64 elements or more"));
      }
    }
    const uint32_t bucket = Value(plan.Add(absl::StrCat(i), elements, shapes[i])).place.bucket;
    if (bucket == tensors.size()) tensors.emplace_back();
    tensors[bucket].append(i);
  }
  const std::vector<uint32_t> tail = plan.Fix();
  py::list out;
  for (uint32_t id = 0; id < plan.bucket_count(); ++id) {
    const PlannedBucket& b = plan.bucket(id);
    const bool closed_by_flush = std::find(tail.begin(), tail.end(), id) != tail.end();
    out.append(py::dict("id"_a = b.id, "path"_a = ExchangePathName(b.path),
                        "elements"_a = b.elements, "tensors"_a = tensors[id],
                        "tail"_a = closed_by_flush));
  }
  return out;
}

}  // namespace
}  // namespace gradwire

PYBIND11_MODULE(_gradwire, m) {
  using namespace gradwire;
  using gradwire::python::UnsignedArgument;
  m.doc() = "gradwire: compressed gradient exchange (C++ core; see the gradwire package)";

  gradwire::python::DefineErrorType(m);
  gradwire::python::DefineExchangeCost(m);  // exchange_cost_binding.h

  m.def(
      "canonical_spec", [](const std::string& spec) { return SpecOf(spec).ToString(); },
      py::arg("spec"),
      "Parses a spec string ('topk:ratio=0.01', ...); returns its canonical form.");
  m.def(
      "spec_settings", [](const std::string& method) { return SettingsOf(SpecOf(method).method); },
      py::arg("method"),
      "The settings (spec keys) a method uses: spec_settings('sign') -> ['bucket', 'ef'].");
  m.def(
      "uses_error_feedback",
      [](const std::string& spec) { return SpecOf(spec).UsesErrorFeedback(); }, py::arg("spec"));
  m.def(
      "selected_count",
      [](const std::string& spec, const py::object& n) {
        return SpecOf(spec).SelectedCount(UnsignedArgument(n, "n", UINT64_MAX));
      },
      py::arg("spec"), py::arg("n"), "k, the values a sparse method sends for n elements.");
  m.def(
      "path_for",
      [](const std::string& spec, const py::object& elements, bool one_dimensional,
         const py::object& dense_below_elements, bool dense_one_dimensional) {
        const PathRule rule = RuleFor(
            spec, UnsignedArgument(dense_below_elements, "dense_below_elements", UINT64_MAX),
            dense_one_dimensional);
        return ExchangePathName(
            rule.PathFor(UnsignedArgument(elements, "elements", UINT64_MAX), one_dimensional));
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
(positions in shapes, in fusion order), 'tail' (still open at the end:
closed by Flush; a dense and a compressed tail bucket are what
GradientExchanger's carry_dense_tail pairs)}] by id (the order buckets
opened).)doc");

  gradwire::python::DefineCommunicator(m);
  gradwire::python::DefineReferenceExchange(m);
}
