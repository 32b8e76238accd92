#include "communicator_options.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "exchange_cost_binding.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "int_argument.h"
#include "status_exception.h"

namespace py = pybind11;

namespace gradwire {
namespace python {
namespace {

// exchange=: None or 'auto' (the cost model), else the exchange every
// compressed buffer takes; also the library's kind names.
std::optional<ExchangeKind> ParseExchange(const py::object& exchange) {
  if (exchange.is_none()) return std::nullopt;
  if (!py::isinstance<py::str>(exchange)) {
    RaiseUnsupported(absl::StrCat("exchange must be a str, got ",
                                  std::string(py::str(py::type::handle_of(exchange)))));
  }
  const std::string name = exchange.cast<std::string>();
  if (name == "auto") return std::nullopt;
  if (name == "allgather") return ExchangeKind::kSparseAllgather;
  if (name == "dense") return ExchangeKind::kDenseRing;
  if (std::optional<ExchangeKind> kind = ExchangeKindFromName(name)) return kind;
  RaiseInvalid(absl::StrCat("exchange must be 'auto', 'allgather', 'sparse_allreduce', ",
                            "'cast_allreduce' or 'dense', got '", name, "'"));
}

}  // namespace

JobSecret ResolveSecret(const py::object& secret, const std::string& secret_file) {
  if (!secret.is_none()) {
    if (!secret_file.empty()) RaiseInvalid("pass secret or secret_file, not both");
    if (!py::isinstance<py::bytes>(secret) && !py::isinstance<py::str>(secret)) {
      RaiseUnsupported(absl::StrCat("secret must be str or bytes, got ",
                                    std::string(py::str(py::type::handle_of(secret)))));
    }
    return Value(JobSecret::FromValue(secret.cast<std::string>(), "secret"));
  }
  if (secret_file.find('\0') != std::string::npos) {
    RaiseInvalid("secret_file holds a NUL byte (the path would be cut there)");
  }
  // Files are read without the GIL: a pipe may take up to
  // JobSecret::kFileReadTimeoutMs, and other threads go on meanwhile.
  absl::StatusOr<JobSecret> resolved = absl::InternalError("unread");
  {
    py::gil_scoped_release release;
    resolved = secret_file.empty() ? JobSecret::Resolve("", "") : JobSecret::FromFile(secret_file);
  }
  if (!secret_file.empty()) return Value(std::move(resolved));
  if (absl::IsFailedPrecondition(resolved.status())) {  // none set
    RaiseInvalid(absl::StrCat(
        "no job secret: every rank of a job needs the same secret of at least ",
        JobSecret::kMinBytes, " bytes. Pass secret_file=PATH (or secret=...), or set $",
        kJobSecretFileEnv, " or $", kJobSecretEnv,
        ". Make one with: (umask 077; python3 -c 'import secrets; print(secrets.token_hex(32))' "
        "> job.secret) and give every rank the file; tools/launch.py makes one for its ranks "
        "when none is set"));
  }
  return Value(std::move(resolved));
}

CommunicatorOptions OptionsOf(const std::string& spec, bool hierarchical,
                              py::handle dense_below_elements, bool dense_one_dimensional,
                              double timeout_s, const std::string& dense_algorithm,
                              int event_loop_nice, const py::object& exchange,
                              const py::object& exchange_model) {
  CommunicatorOptions options;
  options.exchange = ParseExchange(exchange);
  options.exchange_model = ExchangeModelArgument(exchange_model, &options.measure_exchange_model);
  if (event_loop_nice < 0 || event_loop_nice > 19) {
    RaiseInvalid(absl::StrCat("event_loop_nice must be in 0..19, got ", event_loop_nice));
  }
  options.event_loop_nice = event_loop_nice;
  options.compression = Value(CompressionSpec::Parse(spec));
  options.hierarchical = hierarchical;
  options.dense_below_elements =
      UnsignedArgument(dense_below_elements, "dense_below_elements", UINT64_MAX);
  options.dense_one_dimensional = dense_one_dimensional;
  // Dense exchanges are authenticated chunk by chunk, which only the sealed
  // ring does (Communicator::Create refuses anything else).
  if (dense_algorithm != "ring") {
    RaiseInvalid(
        absl::StrCat("dense_algorithm must be 'ring' (halving_doubling is no longer "
                     "offered), got '",
                     dense_algorithm, "'"));
  }
  options.dense_algorithm = transport::AllreduceAlgorithm::kRing;
  if (!(timeout_s >= 0) || !std::isfinite(timeout_s)) {
    RaiseInvalid("timeout_s must be a finite number >= 0 (0: the default, 30 s)");
  }
  return options;
}

void CheckCommunicatorArguments(const std::string& spec, const py::object& secret,
                                bool hierarchical, const py::object& dense_below_elements,
                                bool dense_one_dimensional, double timeout_s,
                                const std::string& dense_algorithm, const std::string& job_suffix,
                                bool emulate_nodes, int event_loop_nice,
                                const std::string& secret_file, const std::string& iface,
                                const std::string& bind_address, const std::string& settings,
                                const py::object& exchange, const py::object& exchange_model) {
  (void)job_suffix, (void)emulate_nodes, (void)iface, (void)bind_address, (void)settings;
  OptionsOf(spec, hierarchical, dense_below_elements, dense_one_dimensional, timeout_s,
            dense_algorithm, event_loop_nice, exchange, exchange_model);
  ResolveSecret(secret, secret_file);
}

}  // namespace python
}  // namespace gradwire
