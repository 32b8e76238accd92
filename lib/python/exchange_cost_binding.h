// gradwire.exchange_cost / gradwire.choose_exchange: the library's exchange
// cost model (lib/comm/exchange_cost_model.h) in the _gradwire extension.
#ifndef GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_
#define GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_

#include <pybind11/pybind11.h>

#include <cstdint>

#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/comm/exchange_cost_model.h"

namespace gradwire {
namespace python {

// Adds exchange_cost, choose_exchange and EXCHANGE_MODEL_DEFAULTS to `m`.
void DefineExchangeCost(pybind11::module_& m);

// The model's fields as a dict (the keys of EXCHANGE_MODEL_DEFAULTS).
pybind11::dict ExchangeModelDict(const ExchangeModel& model);

// The Communicator's exchange_model= argument: None (the defaults),
// 'measure' (the defaults, *measure set: measured at construction), a
// dict of some of ExchangeModelDict's keys to numbers (int or float, not
// bool; the rest keep their defaults) or the same figures as text
// ("bytes_per_second=1.25e8,...": ParseExchangeModel). Raises
// InvalidArgumentError for an unknown key, text that does not parse, a
// rate that is not positive and finite or a time that is negative or not
// finite; UnsupportedError for another type.
ExchangeModel ExchangeModelArgument(const pybind11::object& value, bool* measure);

// {kind name: exchange_cost's dict} for every kind `spec` admits (the
// sparse kinds only for a sparse spec).
pybind11::dict ExchangeEstimates(int ranks, uint64_t elements, const CompressionSpec& spec,
                                 const ExchangeModel& model);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_EXCHANGE_COST_BINDING_H_
