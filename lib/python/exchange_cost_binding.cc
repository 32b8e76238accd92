// The library's exchange cost model (lib/comm/exchange_cost_model.h) for
// Python: gradwire.exchange_cost and gradwire.choose_exchange, so that
// tools/planner.py predicts with the Communicator's own model instead of
// a copy of its formulas. Pure functions: no communicator, no network.
#include "exchange_cost_binding.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "status_exception.h"

namespace gradwire {
namespace python {
namespace {

namespace py = pybind11;
using pybind11::literals::operator""_a;  // py::dict("key"_a = value, ...)

// Whether `kind` can average buffers compressed by `spec` (the sparse
// allreduce needs a sparse spec, the cast allreduce fp16 or bf16).
bool Serves(ExchangeKind kind, const CompressionSpec& spec) {
  if (kind == ExchangeKind::kSparseAllreduce) return spec.SelectsEntries();
  if (kind == ExchangeKind::kCastAllreduce) return spec.CastsTo16Bits();
  return true;
}

ExchangeKind KindOf(const std::string& name) {
  if (std::optional<ExchangeKind> kind = ExchangeKindFromName(name)) return *kind;
  RaiseInvalid(absl::StrCat(
      "kind must be 'dense_ring', 'sparse_allgather', 'sparse_allreduce' or 'cast_allreduce', "
      "got '",
      name, "'"));
}

// `model` with every field checked (`prefix` starts the messages).
ExchangeModel Checked(const ExchangeModel& model, const char* prefix = "") {
  absl::Status s = CheckExchangeModel(model);
  if (!s.ok()) RaiseInvalid(absl::StrCat(prefix, s.message()));
  return model;
}

void CheckShape(int ranks, int64_t elements) {
  if (ranks < 1) RaiseInvalid(absl::StrCat("ranks must be >= 1, got ", ranks));
  if (elements < 0) RaiseInvalid(absl::StrCat("elements must be >= 0, got ", elements));
}

py::dict CostDict(ExchangeKind kind, const ExchangeCost& c) {
  return py::dict("kind"_a = ExchangeKindName(kind), "bytes_sent"_a = c.bytes_sent,
                  "bytes_received"_a = c.bytes_received, "rounds"_a = c.rounds,
                  "messages"_a = c.messages, "wire_s"_a = c.wire_seconds,
                  "compute_s"_a = c.compute_seconds, "seconds"_a = c.seconds());
}

py::dict ExchangeCostOf(const std::string& kind_name, int ranks, int64_t elements,
                        const std::string& spec_text, double bytes_per_second,
                        double seconds_per_round, double encoded_elements_per_second,
                        double decoded_entries_per_second, double reduced_entries_per_second,
                        double streamed_elements_per_second, double seconds_per_message,
                        double seconds_per_byte, double cores_per_rank) {
  const ExchangeKind kind = KindOf(kind_name);
  CheckShape(ranks, elements);
  const CompressionSpec spec = Value(CompressionSpec::Parse(spec_text));
  if (!Serves(kind, spec)) {
    RaiseInvalid(absl::StrCat(kind_name,
                              kind == ExchangeKind::kCastAllreduce
                                  ? " needs an fp16 or bf16 spec"
                                  : " needs a sparse spec (topk, approx_topk, randomk)",
                              ", got '", spec_text, "'"));
  }
  const ExchangeModel model =
      Checked({bytes_per_second, seconds_per_round, encoded_elements_per_second,
               decoded_entries_per_second, reduced_entries_per_second, streamed_elements_per_second,
               seconds_per_message, seconds_per_byte, cores_per_rank});
  return CostDict(kind,
                  EstimateExchange(kind, ranks, static_cast<uint64_t>(elements), spec, model));
}

std::string ChooseExchangeOf(int ranks, int64_t elements, const std::string& spec_text,
                             double bytes_per_second, double seconds_per_round,
                             double encoded_elements_per_second, double decoded_entries_per_second,
                             double reduced_entries_per_second, double streamed_elements_per_second,
                             double seconds_per_message, double seconds_per_byte,
                             double cores_per_rank) {
  CheckShape(ranks, elements);
  const CompressionSpec spec = Value(CompressionSpec::Parse(spec_text));
  const ExchangeModel model =
      Checked({bytes_per_second, seconds_per_round, encoded_elements_per_second,
               decoded_entries_per_second, reduced_entries_per_second, streamed_elements_per_second,
               seconds_per_message, seconds_per_byte, cores_per_rank});
  return ExchangeKindName(ChooseExchange(ranks, static_cast<uint64_t>(elements), spec, model));
}

bool DenseTwoLevelOf(int nodes, int local, int64_t elements, double bytes_per_second,
                     double seconds_per_round, double encoded_elements_per_second,
                     double decoded_entries_per_second, double reduced_entries_per_second,
                     double streamed_elements_per_second, double seconds_per_message,
                     double seconds_per_byte, double cores_per_rank) {
  if (nodes < 1) RaiseInvalid(absl::StrCat("nodes must be >= 1, got ", nodes));
  if (local < 1) RaiseInvalid(absl::StrCat("local must be >= 1, got ", local));
  CheckShape(nodes, elements);
  const ExchangeModel model =
      Checked({bytes_per_second, seconds_per_round, encoded_elements_per_second,
               decoded_entries_per_second, reduced_entries_per_second, streamed_elements_per_second,
               seconds_per_message, seconds_per_byte, cores_per_rank});
  return DenseTwoLevel(nodes, local, static_cast<uint64_t>(elements), model);
}

bool DenseRidesAllgatherOf(int ranks, int64_t dense_elements, double bytes_per_second,
                           double seconds_per_round, double encoded_elements_per_second,
                           double decoded_entries_per_second, double reduced_entries_per_second,
                           double streamed_elements_per_second, double seconds_per_message,
                           double seconds_per_byte, double cores_per_rank) {
  CheckShape(ranks, dense_elements);
  const ExchangeModel model =
      Checked({bytes_per_second, seconds_per_round, encoded_elements_per_second,
               decoded_entries_per_second, reduced_entries_per_second, streamed_elements_per_second,
               seconds_per_message, seconds_per_byte, cores_per_rank});
  return DenseRidesAllgather(ranks, static_cast<uint64_t>(dense_elements), model);
}

}  // namespace

py::dict ExchangeModelDict(const ExchangeModel& model) {
  py::dict d;
  for (const ExchangeModelField& f : ExchangeModelFields()) d[f.name] = model.*f.member;
  return d;
}

ExchangeModel ExchangeModelArgument(const py::object& value, bool* measure) {
  *measure = false;
  ExchangeModel model;
  if (value.is_none()) return model;
  if (py::isinstance<py::str>(value)) {
    const std::string text = value.cast<std::string>();
    if (text == "measure") {
      *measure = true;
      return model;
    }
    // The tools' text form, "bytes_per_second=1.25e8,seconds_per_round=2e-4".
    absl::StatusOr<ExchangeModel> parsed = ParseExchangeModel(text);
    if (!parsed.ok()) {
      RaiseInvalid(
          absl::StrCat("exchange_model must be None, 'measure', a dict or figures by "
                       "name ('bytes_per_second=1.25e8,...'), got '",
                       text, "': ", parsed.status().message()));
    }
    return *parsed;
  }
  if (!py::isinstance<py::dict>(value)) {
    RaiseUnsupported(absl::StrCat(
        "exchange_model must be None, 'measure', a dict or figures by name in a str, got ",
        std::string(py::str(py::type::handle_of(value)))));
  }
  for (const auto& [key, item] : value.cast<py::dict>()) {
    if (!py::isinstance<py::str>(key)) {
      RaiseUnsupported(absl::StrCat("exchange_model's keys must be str, got ",
                                    std::string(py::str(py::type::handle_of(key)))));
    }
    const std::string name = key.cast<std::string>();
    const ExchangeModelField* field = FindExchangeModelField(name);
    if (field == nullptr) {
      RaiseInvalid(absl::StrCat("exchange_model: unknown key '", name,
                                "' (the keys: ", ExchangeModelFieldNames(),
                                "; gradwire.EXCHANGE_MODEL_DEFAULTS has them all)"));
    }
    // Anything with __float__ (int, float, numpy's scalars), but not bool.
    if (py::isinstance<py::bool_>(item) || !py::hasattr(item, "__float__")) {
      RaiseUnsupported(absl::StrCat("exchange_model['", name, "'] must be a number, got ",
                                    std::string(py::str(py::type::handle_of(item)))));
    }
    model.*field->member = py::float_(py::reinterpret_borrow<py::object>(item)).cast<double>();
  }
  return Checked(model, "exchange_model's ");
}

py::dict ExchangeEstimates(int ranks, uint64_t elements, const CompressionSpec& spec,
                           const ExchangeModel& model) {
  py::dict d;
  for (ExchangeKind kind : kExchangeKinds) {
    if (!Serves(kind, spec)) continue;
    d[ExchangeKindName(kind)] =
        CostDict(kind, EstimateExchange(kind, ranks, elements, spec, model));
  }
  return d;
}

void DefineExchangeCost(py::module_& m) {
  const ExchangeModel defaults;
  m.attr("EXCHANGE_MODEL_DEFAULTS") = ExchangeModelDict(defaults);
  // Each entry point takes its own leading arguments, then the model's
  // (with EXCHANGE_MODEL_DEFAULTS as defaults), then its doc string.
  auto def_with_model = [&](const char* name, auto fn, const char* doc, auto... leading) {
    m.def(name, fn, leading..., py::arg("bytes_per_second") = defaults.bytes_per_second,
          py::arg("seconds_per_round") = defaults.seconds_per_round,
          py::arg("encoded_elements_per_second") = defaults.encoded_elements_per_second,
          py::arg("decoded_entries_per_second") = defaults.decoded_entries_per_second,
          py::arg("reduced_entries_per_second") = defaults.reduced_entries_per_second,
          py::arg("streamed_elements_per_second") = defaults.streamed_elements_per_second,
          py::arg("seconds_per_message") = defaults.seconds_per_message,
          py::arg("seconds_per_byte") = defaults.seconds_per_byte,
          py::arg("cores_per_rank") = defaults.cores_per_rank, doc);
  };
  def_with_model("exchange_cost", &ExchangeCostOf,
                 R"doc(The library's predicted cost of averaging `elements` fp32 over `ranks`
ranks with one exchange (lib/comm/exchange_cost_model.h, EstimateExchange):
kind 'dense_ring', 'sparse_allgather' or 'sparse_allreduce' (the last
needs a sparse spec); the model: one rank's link (bytes/s each way),
seconds per message step, encode, decode, the sparse allreduce's entry
and dense-pass rates, CPU seconds
per extra message and per byte sent or received, the cores each rank gets (0.5: four ranks on two cores;
defaults: EXCHANGE_MODEL_DEFAULTS). Returns {'kind',
'bytes_sent', 'bytes_received' (per rank), 'rounds', 'messages', 'wire_s',
'compute_s', 'seconds'}.)doc",
                 py::arg("kind"), py::arg("ranks"), py::arg("elements"), py::arg("spec"));
  def_with_model("choose_exchange", &ChooseExchangeOf,
                 R"doc(The exchange the Communicator picks for a flat bucket (ChooseExchange):
for a sparse spec the kind with the smallest predicted time; for QSGD, sign,
fp16 and bf16 by bytes alone (the ring only where a QSGD or sign payload is
at least 8n/P bytes; the cast allreduce from 3 ranks); 'dense_ring' for
'none'. Same model arguments as exchange_cost.)doc",
                 py::arg("ranks"), py::arg("elements"), py::arg("spec"));
  def_with_model("dense_two_level", &DenseTwoLevelOf,
                 R"doc(Whether a hierarchical Communicator of nodes x local ranks averages a dense
buffer of `elements` in two levels (reduce-scatter in the node, rings across
the nodes on 1/local shards, allgather in the node) rather than by the
world's ring (DenseTwoLevel): where the model predicts it faster. Same model
arguments as exchange_cost.)doc",
                 py::arg("nodes"), py::arg("local"), py::arg("elements"));
  def_with_model("dense_rides_allgather", &DenseRidesAllgatherOf,
                 R"doc(Whether a dense buffer of `dense_elements` rides in a sparse allgather's
frames rather than taking a dense ring of its own (DenseRidesAllgather;
GradientExchanger's dense tail): where the model predicts the (P - 1) x 4 x
dense_elements bytes it adds to what each rank receives no slower than the
ring. Same model arguments as exchange_cost.)doc",
                 py::arg("ranks"), py::arg("dense_elements"));
}

}  // namespace python
}  // namespace gradwire
