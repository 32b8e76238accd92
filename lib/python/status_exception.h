// The one mapping from absl::Status to Python exceptions for both
// extensions (_gradwire: communicator, reference; _gradwire_data: data
// cache), which raise the same gradwire.Error:
//   InvalidArgument, OutOfRange  -> ValueError        (bad arguments)
//   NotFound                     -> FileNotFoundError (a missing dataset, key or file)
//   anything else                -> gradwire.Error, an OSError subclass
//                                   (dead or stalled peers, damaged bytes,
//                                   refused credentials, a poisoned object)
// The message is Status::ToString(): the code first ("UNAVAILABLE: ...").
#ifndef GRADWIRE_LIB_PYTHON_STATUS_EXCEPTION_H_
#define GRADWIRE_LIB_PYTHON_STATUS_EXCEPTION_H_

#include <pybind11/pybind11.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gradwire {
namespace python {

// The core extension: creates gradwire.Error in `m`; call once, before
// any Raise.
void DefineErrorType(pybind11::module_& m);
// The data-cache extension: raises the core's gradwire.Error (importing
// gradwire._gradwire, which the gradwire package has loaded) and adds it
// to `m` as Error. Call once, before any Raise.
void UseCoreErrorType(pybind11::module_& m);

[[noreturn]] void Raise(const absl::Status& status);

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
