// The one mapping from absl::Status to Python exceptions for both
// extensions (_gradwire: communicator, reference; _gradwire_data: data
// cache), which raise the same classes, defined by the core:
//
//   gradwire.Error (Exception)                   every error gradwire raises; .code is
//   |                                            the status code ("UNAVAILABLE", ...)
//   +- InvalidArgumentError (ValueError)        INVALID_ARGUMENT, OUT_OF_RANGE: bad arguments
//   |  +- MismatchError                         ranks disagree ("collective mismatch ...":
//   |                                            a spec, a secret, a call)
//   +- UnsupportedError (TypeError)             a buffer gradwire cannot take (dtype,
//   |                                            device, layout); raised by the binding
//   +- NotFoundError (FileNotFoundError)        NOT_FOUND: a missing dataset, key or file
//   +- CommunicationError (RuntimeError, OSError)  everything else: dead or stalled
//                                                peers, refused credentials, damaged
//                                                bytes, a poisoned communicator
//
// Argument errors carry the library's message alone; CommunicationError's
// starts with the status code ("DEADLINE_EXCEEDED: ..."). Messages name
// Python arguments: the library's names for command-line flags
// ("--compression_ratio") become the Python names ("ratio"), see
// PythonMessage. CommunicationError is also an OSError because
// gradwire.Error was one before this hierarchy.
#ifndef GRADWIRE_LIB_PYTHON_STATUS_EXCEPTION_H_
#define GRADWIRE_LIB_PYTHON_STATUS_EXCEPTION_H_

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace python {

// The core extension: creates the classes above in `m`; call once, before
// any Raise.
void DefineErrorType(pybind11::module_& m);
// The data-cache extension: raises the core's classes (importing
// gradwire._gradwire, which the gradwire package has loaded) and adds
// them to `m` (m.Error is gradwire.Error). Call once, before any Raise.
void UseCoreErrorType(pybind11::module_& m);

[[noreturn]] void Raise(const absl::Status& status);

// Raises gradwire.UnsupportedError (a TypeError) with `message`.
[[noreturn]] void RaiseUnsupported(const std::string& message);
// Raises gradwire.InvalidArgumentError (a ValueError) with `message`.
[[noreturn]] void RaiseInvalid(const std::string& message);

// `message` with the library's flag names replaced by the Python
// arguments that set the same thing: "ratio (--compression_ratio) must
// be ..." -> "ratio must be ...", "--quant_bits must be" -> "bits must
// be". Flags it does not know are left as they are.
std::string PythonMessage(absl::string_view message);

inline void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_STATUS_EXCEPTION_H_
