#include "status_exception.h"

#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace gradwire {
namespace python {
namespace {

py::handle g_error;  // gradwire.Error, set by DefineErrorType

}  // namespace

void DefineErrorType(py::module_& m) {
  static py::exception<std::runtime_error> error(m, "Error", PyExc_OSError);
  g_error = error;
}

void UseCoreErrorType(py::module_& m) {
  py::object error = py::module_::import("gradwire._gradwire").attr("Error");
  m.attr("Error") = error;
  g_error = error.release();  // held for the life of the process
}

void Raise(const absl::Status& status) {
  const std::string message = status.ToString();
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      throw py::value_error(message);
    case absl::StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
      throw py::error_already_set();
    default:
      PyErr_SetString(g_error.ptr(), message.c_str());
      throw py::error_already_set();
  }
}

}  // namespace python
}  // namespace gradwire
