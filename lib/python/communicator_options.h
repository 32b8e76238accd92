// The Python Communicator's constructor arguments, checked: the
// CommunicatorOptions they make and the job secret they name. Every
// check raises gradwire's errors (status_exception.h) naming the argument,
// before anyone is joined.
#ifndef GRADWIRE_LIB_PYTHON_COMMUNICATOR_OPTIONS_H_
#define GRADWIRE_LIB_PYTHON_COMMUNICATOR_OPTIONS_H_

#include <pybind11/pybind11.h>

#include <string>

#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"

namespace gradwire {
namespace python {

// secret=, secret_file=, then JobSecret::Resolve's environment
// ($GRADWIRE_JOB_SECRET, then the file $GRADWIRE_JOB_SECRET_FILE); none of
// them: an error that says how to make one.
JobSecret ResolveSecret(const pybind11::object& secret, const std::string& secret_file);

// The Communicator's options from the constructor's arguments, each
// checked (InvalidArgumentError naming it). exchange: None or 'auto' (the
// cost model), else the exchange every compressed buffer takes
// ('allgather', 'dense' and the library's kind names). exchange_model:
// None, 'measure', a dict or its text form (ExchangeModelArgument,
// exchange_cost_binding.h).
CommunicatorOptions OptionsOf(const std::string& spec, bool hierarchical,
                              pybind11::handle dense_below_elements, bool dense_one_dimensional,
                              double timeout_s, const std::string& dense_algorithm,
                              int event_loop_nice, const pybind11::object& exchange,
                              const pybind11::object& exchange_model);

// The constructor's checks of its own arguments, without joining anyone:
// Communicator(process_group=...) runs them before it touches the group's
// store, so that an argument a rank gets wrong fails there, before any
// key is set that a peer could be waiting on.
void CheckCommunicatorArguments(const std::string& spec, const pybind11::object& secret,
                                bool hierarchical, const pybind11::object& dense_below_elements,
                                bool dense_one_dimensional, double timeout_s,
                                const std::string& dense_algorithm, const std::string& job_suffix,
                                bool emulate_nodes, int event_loop_nice,
                                const std::string& secret_file, const std::string& iface,
                                const std::string& bind_address, const std::string& settings,
                                const pybind11::object& exchange,
                                const pybind11::object& exchange_model);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_COMMUNICATOR_OPTIONS_H_
