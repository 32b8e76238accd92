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

// The model's figures by name over the defaults (ExchangeModelDict's keys
// to numbers: int, float or anything with __float__, not bool), each
// checked; `what` starts the messages.
ExchangeModel FiguresByName(const py::dict& figures, const std::string& what) {
  ExchangeModel model;
  for (const auto& [key, item] : figures) {
    if (!py::isinstance<py::str>(key)) {
      RaiseUnsupported(absl::StrCat(what, "'s keys must be str, got ",
                                    std::string(py::str(py::type::handle_of(key)))));
    }
    const std::string name = key.cast<std::string>();
    const ExchangeModelField* field = FindExchangeModelField(name);
    if (field == nullptr) {
      RaiseInvalid(absl::StrCat(what, ": unknown key '", name,
                                "' (the keys: ", ExchangeModelFieldNames(),
                                "; gradwire.EXCHANGE_MODEL_DEFAULTS has them all)"));
    }
    if (py::isinstance<py::bool_>(item) || !py::hasattr(item, "__float__")) {
      RaiseUnsupported(absl::StrCat(what, "['", name, "'] must be a number, got ",
                                    std::string(py::str(py::type::handle_of(item)))));
    }
    model.*field->member = py::float_(py::reinterpret_borrow<py::object>(item)).cast<double>();
  }
  return Checked(model, (what + "'s ").c_str());
}

// The model an entry point's keyword arguments give.
ExchangeModel ModelOf(const py::kwargs& figures) { return FiguresByName(figures, "model"); }

py::dict ExchangeCostOf(const std::string& kind_name, int ranks, int64_t elements,
                        const std::string& spec_text, const py::kwargs& figures) {
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
  const ExchangeModel model = ModelOf(figures);
  return CostDict(kind,
                  EstimateExchange(kind, ranks, static_cast<uint64_t>(elements), spec, model));
}

std::string ChooseExchangeOf(int ranks, int64_t elements, const std::string& spec_text,
                             const py::kwargs& figures) {
  CheckShape(ranks, elements);
  const CompressionSpec spec = Value(CompressionSpec::Parse(spec_text));
  const ExchangeModel model = ModelOf(figures);
  return ExchangeKindName(ChooseExchange(ranks, static_cast<uint64_t>(elements), spec, model));
}

bool DenseTwoLevelOf(int nodes, int local, int64_t elements, const py::kwargs& figures) {
  if (nodes < 1) RaiseInvalid(absl::StrCat("nodes must be >= 1, got ", nodes));
  if (local < 1) RaiseInvalid(absl::StrCat("local must be >= 1, got ", local));
  CheckShape(nodes, elements);
  return DenseTwoLevel(nodes, local, static_cast<uint64_t>(elements), ModelOf(figures));
}

bool DenseRidesAllgatherOf(int ranks, int64_t dense_elements, const py::kwargs& figures) {
  CheckShape(ranks, dense_elements);
  return DenseRidesAllgather(ranks, static_cast<uint64_t>(dense_elements), ModelOf(figures));
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
  return FiguresByName(value.cast<py::dict>(), "exchange_model");
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
  // figures by keyword (any of EXCHANGE_MODEL_DEFAULTS' keys; the rest
  // keep their defaults), then its doc string.
  auto def_with_model = [&](const char* name, auto fn, const char* doc, auto... leading) {
    m.def(name, fn, leading..., doc);
  };
  def_with_model("exchange_cost", &ExchangeCostOf,
                 R"doc(The library's predicted cost of averaging `elements` fp32 over `ranks`
ranks with one exchange (lib/comm/exchange_cost_model.h, EstimateExchange):
kind 'dense_ring', 'sparse_allgather' or 'sparse_allreduce' (the last
needs a sparse spec). The model's figures by keyword, any of
EXCHANGE_MODEL_DEFAULTS' keys (the rest keep those defaults): one rank's
link (bytes/s each way), seconds per message step, the encode, decode,
sparse allreduce entry and dense-pass rates, CPU seconds per extra message
and per byte sent or received, the cores each rank gets (0.5: four ranks on
two cores); an unknown key, a rate that is not positive and finite or a
negative time is a ValueError. Returns {'kind',
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
