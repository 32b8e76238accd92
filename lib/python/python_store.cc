#include "python_store.h"

#include <pybind11/stl.h>

#include <utility>

#include "gloo/common/error.h"

namespace py = pybind11;

namespace gradwire {
namespace python {

PythonStore::PythonStore(py::object store, std::chrono::milliseconds default_timeout)
    : TimedStore(default_timeout), store_(std::move(store)) {}

PythonStore::~PythonStore() {
  if (!Py_IsInitialized()) {  // the interpreter is gone: nothing to release
    store_.release();
    return;
  }
  py::gil_scoped_acquire gil;
  store_ = py::object();
}

// Runs `fn` under the GIL; a Python exception becomes Gloo's IoException.
template <typename Fn>
auto CallPython(const char* what, const std::string& key, Fn fn) -> decltype(fn()) {
  py::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (py::error_already_set& e) {
    GLOO_THROW_IO_EXCEPTION("store ", what, " ", key, ": ", e.what());
  }
}

void PythonStore::set(const std::string& key, const std::vector<char>& data) {
  CallPython("set", key, [&] { store_.attr("set")(key, py::bytes(data.data(), data.size())); });
}

std::vector<char> PythonStore::get(const std::string& key) {
  return CallPython("get", key, [&] {
    std::string value = store_.attr("get")(key).cast<py::bytes>();
    return std::vector<char>(value.begin(), value.end());
  });
}

void PythonStore::WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  CallPython("wait", keys.empty() ? std::string() : keys.front(),
             [&] { store_.attr("wait")(keys, static_cast<double>(timeout.count()) / 1000.0); });
}

}  // namespace python
}  // namespace gradwire
