// gradwire._gradwire.ReferenceExchange: a flat exchange computed in one
// process, what every rank of a Communicator must get (the tests' oracle).
#ifndef GRADWIRE_LIB_PYTHON_REFERENCE_BINDING_H_
#define GRADWIRE_LIB_PYTHON_REFERENCE_BINDING_H_

#include <pybind11/pybind11.h>

namespace gradwire {
namespace python {

void DefineReferenceExchange(pybind11::module_& m);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_REFERENCE_BINDING_H_
