// A Gloo rendezvous store whose plain wait(keys) waits a default timeout.
//
// gloo::rendezvous::Store has two waits, with and without a timeout.
// gradwire's stores (RedisStore, RendezvousStore, the Python-object store
// of lib/python) all answer the one without by waiting their own default:
// a subclass implements set, get and WaitFor (both waits call it), and
// passes that default to this constructor.
#ifndef GRADWIRE_TRANSPORT_TIMED_STORE_H_
#define GRADWIRE_TRANSPORT_TIMED_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"

namespace gradwire {
namespace transport {

class TimedStore : public gloo::rendezvous::Store {
 public:
  // WaitFor(keys, default_timeout())
  void wait(const std::vector<std::string>& keys) final { WaitFor(keys, default_timeout_); }
  // WaitFor(keys, timeout)
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) final {
    WaitFor(keys, timeout);
  }

  std::chrono::milliseconds default_timeout() const { return default_timeout_; }

 protected:
  explicit TimedStore(std::chrono::milliseconds default_timeout)
      : default_timeout_(default_timeout) {}

  // Returns once every key exists; throws gloo::IoException ("Wait
  // timeout ...") when `timeout` passes first.
  virtual void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

 private:
  const std::chrono::milliseconds default_timeout_;
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_TIMED_STORE_H_
