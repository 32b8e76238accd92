#include "status_exception.h"

#include <Python.h>

#include <cctype>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace py = pybind11;

namespace gradwire {
namespace python {
namespace {

// The classes, created by DefineErrorType (or fetched by
// UseCoreErrorType) and held for the life of the process.
struct Classes {
  py::handle error, invalid_argument, mismatch, unsupported, not_found, communication;
};
Classes g_classes;

// Their names in the gradwire module, and where each is held.
constexpr const char* kNames[] = {"Error",         "InvalidArgumentError",
                                  "MismatchError", "UnsupportedError",
                                  "NotFoundError", "CommunicationError"};
py::handle* const kSlots[] = {&g_classes.error,     &g_classes.invalid_argument,
                              &g_classes.mismatch,  &g_classes.unsupported,
                              &g_classes.not_found, &g_classes.communication};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == sizeof(kSlots) / sizeof(kSlots[0]));

py::handle NewClass(py::module_& m, const char* name, const char* doc, py::tuple bases) {
  const std::string full = absl::StrCat("gradwire.", name);
  PyObject* cls = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(cls);
  return cls;  // the new reference is kept (never released)
}

// The library's flags and the Python arguments that set the same thing.
struct FlagName {
  absl::string_view flag;
  absl::string_view python;
};
constexpr FlagName kFlagNames[] = {
    {"compression", "method"},
    {"compression_ratio", "ratio"},
    {"quant_bits", "bits"},
    {"bucket_size", "bucket"},
    {"error_feedback", "error_feedback"},
    {"seed", "seed"},
    {"values", "values"},
    {"indices", "indices"},
    {"job_secret", "secret"},
    {"job_secret_file", "secret_file"},
    {"iface", "iface"},
    {"bind_address", "bind_address"},
};

const FlagName* KnownFlag(absl::string_view token) {
  for (const FlagName& f : kFlagNames) {
    if (f.flag == token) return &f;
  }
  return nullptr;
}

bool FlagChar(char c) { return std::islower(static_cast<unsigned char>(c)) || c == '_'; }

// The flag token starting at message[pos] (just after "--").
absl::string_view FlagAt(absl::string_view message, size_t pos) {
  size_t end = pos;
  while (end < message.size() && FlagChar(message[end])) ++end;
  return message.substr(pos, end - pos);
}

[[noreturn]] void RaiseWith(py::handle cls, const char* code, const std::string& message) {
  py::object exc = py::reinterpret_borrow<py::object>(cls)(message);
  exc.attr("code") = code;
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

}  // namespace

std::string PythonMessage(absl::string_view message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    // " (--flag)" after the Python name of the same setting: dropped.
    if (absl::StartsWith(message.substr(i), " (--")) {
      absl::string_view token = FlagAt(message, i + 4);
      const size_t close = i + 4 + token.size();
      if (KnownFlag(token) != nullptr && close < message.size() && message[close] == ')') {
        i = close + 1;
        continue;
      }
    }
    if (absl::StartsWith(message.substr(i), "--") && (i == 0 || !FlagChar(message[i - 1]))) {
      absl::string_view token = FlagAt(message, i + 2);
      if (const FlagName* f = KnownFlag(token)) {
        absl::StrAppend(&out, f->python);
        i += 2 + token.size();
        continue;
      }
    }
    out.push_back(message[i++]);
  }
  return out;
}

void DefineErrorType(py::module_& m) {
  g_classes.error = NewClass(
      m, "Error", "Base of every error gradwire raises; .code is the library's status code.",
      py::make_tuple(py::handle(PyExc_Exception)));
  g_classes.invalid_argument =
      NewClass(m, "InvalidArgumentError", "A bad argument (a ValueError).",
               py::make_tuple(g_classes.error, py::handle(PyExc_ValueError)));
  g_classes.mismatch = NewClass(
      m, "MismatchError",
      "Ranks disagree (spec, secret, settings or a collective call); raised on every rank.",
      py::make_tuple(g_classes.invalid_argument));
  g_classes.unsupported =
      NewClass(m, "UnsupportedError",
               "A buffer gradwire cannot take: dtype, device or layout (a TypeError).",
               py::make_tuple(g_classes.error, py::handle(PyExc_TypeError)));
  g_classes.not_found =
      NewClass(m, "NotFoundError", "A missing dataset, key or file (a FileNotFoundError).",
               py::make_tuple(g_classes.error, py::handle(PyExc_FileNotFoundError)));
  g_classes.communication = NewClass(
      m, "CommunicationError",
      "A failed exchange or rendezvous: dead or stalled peers, refused credentials, damaged "
      "bytes, a poisoned communicator (a RuntimeError; also an OSError).",
      py::make_tuple(g_classes.error, py::handle(PyExc_RuntimeError), py::handle(PyExc_OSError)));
}

void UseCoreErrorType(py::module_& m) {
  py::module_ core = py::module_::import("gradwire._gradwire");
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
    py::object cls = core.attr(kNames[i]);
    m.attr(kNames[i]) = cls;
    *kSlots[i] = cls.release();  // held for the life of the process
  }
}

void Raise(const absl::Status& status) {
  const std::string code = absl::StatusCodeToString(status.code());
  const std::string message = PythonMessage(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      RaiseWith(absl::StartsWith(message, "collective mismatch") ? g_classes.mismatch
                                                                 : g_classes.invalid_argument,
                code.c_str(), message);
    case absl::StatusCode::kNotFound:
      RaiseWith(g_classes.not_found, code.c_str(), message);
    default:
      RaiseWith(g_classes.communication, code.c_str(), absl::StrCat(code, ": ", message));
  }
}

void RaiseUnsupported(const std::string& message) {
  RaiseWith(g_classes.unsupported, "INVALID_ARGUMENT", message);
}

void RaiseInvalid(const std::string& message) {
  RaiseWith(g_classes.invalid_argument, "INVALID_ARGUMENT", message);
}

}  // namespace python
}  // namespace gradwire
