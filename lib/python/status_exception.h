// The one mapping from absl::Status to Python exceptions for the whole
// _gradwire module (communicator, reference, data cache):
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

// Registers gradwire.Error in `m`; call once, before any Raise.
void DefineErrorType(pybind11::module_& m);

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
