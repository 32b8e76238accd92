#include "int_argument.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "status_exception.h"

namespace gradwire {
namespace python {

namespace py = pybind11;

namespace {

// An int as text for a message: at most 40 characters (a huge int's
// decimal form is long, and Python may refuse to make it).
std::string Shown(const py::handle& as_int) {
  PyObject* text = PyObject_Str(as_int.ptr());
  if (text == nullptr) {
    PyErr_Clear();
    return "a very large int";
  }
  std::string s = py::reinterpret_steal<py::str>(text).cast<std::string>();
  return s.size() <= 40 ? s : s.substr(0, 20) + "..." + s.substr(s.size() - 8);
}

}  // namespace

uint64_t UnsignedArgument(py::handle value, const char* name, uint64_t max) {
  PyObject* o = value.ptr();
  if (o == nullptr || PyBool_Check(o) || !PyIndex_Check(o)) {
    RaiseUnsupported(absl::StrCat(name, " must be an int, got ",
                                  o == nullptr ? "nothing" : Py_TYPE(o)->tp_name));
  }
  py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(o));
  if (!as_int) throw py::error_already_set();
  const std::string range = absl::StrCat(name, " must be in 0..", max, ", got ");
  int overflow = 0;
  const long long signed_value = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
  if (signed_value == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && signed_value < 0)) RaiseInvalid(range + Shown(as_int));
  uint64_t v = static_cast<uint64_t>(signed_value);
  if (overflow > 0) {
    const unsigned long long big = PyLong_AsUnsignedLongLong(as_int.ptr());
    if (big == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      RaiseInvalid(range + Shown(as_int));
    }
    v = big;
  }
  if (v > max) RaiseInvalid(range + Shown(as_int));
  return v;
}

}  // namespace python
}  // namespace gradwire
