// Bound(&Class::Method): a member function as pybind11 binds it, but
// refusing an object whose __init__ never ran. pybind11 hands a member
// function the instance's storage, which holds no object for one made by
// Class.__new__(Class) alone: the call then read garbage or crashed the
// process. Here it raises TypeError instead.
#ifndef GRADWIRE_LIB_PYTHON_BOUND_METHOD_H_
#define GRADWIRE_LIB_PYTHON_BOUND_METHOD_H_

#include <pybind11/pybind11.h>

#include <utility>

namespace gradwire {
namespace python {

// The C++ object behind `self`, or TypeError when its __init__ never ran
// (its holder was never constructed: the storage holds no object).
template <typename C>
C* Initialized(pybind11::handle self) {
  if (!pybind11::isinstance<C>(self)) throw pybind11::type_error("not a gradwire object");
  auto* inst = reinterpret_cast<pybind11::detail::instance*>(self.ptr());
  const pybind11::detail::value_and_holder v_h =
      inst->get_value_and_holder(pybind11::detail::get_type_info(typeid(C)), false);
  if (!v_h || !v_h.holder_constructed() || v_h.value_ptr() == nullptr) {
    throw pybind11::type_error(
        "this gradwire object was never initialized (made by __new__ without __init__)");
  }
  return v_h.template value_ptr<C>();
}

template <typename C, typename R, typename... A>
auto Bound(R (C::*method)(A...)) {
  return [method](pybind11::handle self, A... args) -> R {
    return (Initialized<C>(self)->*method)(std::forward<A>(args)...);
  };
}

template <typename C, typename R, typename... A>
auto Bound(R (C::*method)(A...) const) {
  return [method](pybind11::handle self, A... args) -> R {
    return (Initialized<C>(self)->*method)(std::forward<A>(args)...);
  };
}

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_BOUND_METHOD_H_
