// Integer arguments from Python, checked with a message that names them.
//
// pybind11 refuses an int that does not fit a uint32_t or uint64_t
// parameter (a bucket of -1, a step of 2^64) with "incompatible function
// arguments" and the whole signature. A binding that takes such an argument
// as py::object and reads it here raises instead:
//   UnsupportedError (a TypeError) for a non-integer or a bool:
//       "bucket must be an int, got float"
//   InvalidArgumentError (a ValueError) for an int out of range:
//       "bucket must be in 0..4294967295, got -1"
// Anything with __index__ (numpy and torch integer scalars) counts as an
// int, as in pybind11's own conversion.
#ifndef GRADWIRE_LIB_PYTHON_INT_ARGUMENT_H_
#define GRADWIRE_LIB_PYTHON_INT_ARGUMENT_H_

#include <pybind11/pybind11.h>

#include <cstdint>

namespace gradwire {
namespace python {

// `value` as an integer in [0, max]; raises as above, naming `name`.
uint64_t UnsignedArgument(pybind11::handle value, const char* name, uint64_t max);

// The arguments every exchange call takes.
inline uint32_t BucketArgument(pybind11::handle value) {
  return static_cast<uint32_t>(UnsignedArgument(value, "bucket", UINT32_MAX));
}
inline uint64_t StepArgument(pybind11::handle value) {
  return UnsignedArgument(value, "step", UINT64_MAX);
}

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_INT_ARGUMENT_H_
