// A Gloo rendezvous store backed by a Python object, so ranks can meet
// through a store Python already has: torch.distributed's (its c10d
// Store, reached through gradwire's adapter in gradwire/_torch_join.py).
//
// The object needs three methods:
//   set(key: str, value: bytes)
//   get(key: str) -> bytes           (the key exists: wait() came first)
//   wait(keys: list[str], timeout_s: float)   raises on timeout
// Each call takes the GIL (the caller of Gloo's rendezvous must have
// released it). What the Python side raises becomes a gloo::IoException
// carrying the exception's type and message, which transport/'s
// CallGloo turns into DeadlineExceeded when it mentions a timeout and
// Unavailable otherwise. Keys arrive already prefixed by the
// RendezvousStore that wraps this one (RendezvousStore::Wrap).
#ifndef GRADWIRE_LIB_PYTHON_PYTHON_STORE_H_
#define GRADWIRE_LIB_PYTHON_PYTHON_STORE_H_

#include <pybind11/pybind11.h>

#include <chrono>
#include <string>
#include <vector>

#include "gradwire/transport/timed_store.h"

namespace gradwire {
namespace python {

class PythonStore : public transport::TimedStore {
 public:
  // Call with the GIL held. `default_timeout` serves wait(keys).
  PythonStore(pybind11::object store, std::chrono::milliseconds default_timeout);
  ~PythonStore() override;  // takes the GIL to drop the reference

  // store.set(key, bytes(data))
  void set(const std::string& key, const std::vector<char>& data) override;
  // store.get(key), as a byte vector
  std::vector<char> get(const std::string& key) override;

 private:
  // store.wait(keys, timeout in seconds); wait(keys) passes default_timeout.
  void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  pybind11::object store_;
};

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_PYTHON_STORE_H_
