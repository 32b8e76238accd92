// gradwire.exchange_cost / gradwire.choose_exchange: the library's exchange
// cost model (lib/comm/exchange_cost_model.h) in the _gradwire extension.
#ifndef GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_
#define GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_

#include <pybind11/pybind11.h>

namespace gradwire {
namespace python {

// Adds exchange_cost, choose_exchange and EXCHANGE_MODEL_DEFAULTS to `m`.
void DefineExchangeCost(pybind11::module_& m);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_
