// gradwire._gradwire.Communicator: the C++ Communicator for Python (the
// gradwire package's Communicator class adds typed spec arguments and
// torch.distributed process groups on top; see gradwire/__init__.py).
#ifndef GRADWIRE_LIB_PYTHON_COMMUNICATOR_BINDING_H_
#define GRADWIRE_LIB_PYTHON_COMMUNICATOR_BINDING_H_

#include <pybind11/pybind11.h>

namespace gradwire {
namespace python {

void DefineCommunicator(pybind11::module_& m);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_COMMUNICATOR_BINDING_H_
