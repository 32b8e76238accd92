// Our edge with Gloo: its exceptions become absl::Status, our durations
// become its timeouts.
//
// Gloo reports every failure by throwing (IoException for a dead or
// stalled peer, EnforceNotMet for a violated precondition, plain
// std::exception from the standard library). Nothing thrown may cross
// gradwire's API, so each call into Gloo is wrapped in CallGloo().
#ifndef GRADWIRE_TRANSPORT_GLOO_STATUS_H_
#define GRADWIRE_TRANSPORT_GLOO_STATUS_H_

#include <chrono>
#include <exception>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gradwire/transport/gloo_fwd.h"

namespace gradwire {
namespace transport {

// Runs `fn` and maps what it throws to a Status whose message starts with
// `what`:
//   gloo::IoException mentioning a timeout   -> DeadlineExceeded
//   gloo::IoException otherwise (peer died)   -> Unavailable
//   gloo::EnforceNotMet / other exceptions    -> Internal (a Gloo invariant
//       broke; retrying cannot help, so it is not reported as transient)
absl::Status CallGloo(absl::string_view what, const std::function<void()>& fn);

// The classification above, for an exception already caught.
absl::Status StatusFromException(absl::string_view what, std::exception_ptr e);

// `d` as a Gloo timeout, at least 1 ms: Gloo reads -1 ms as "unset, use
// the context's default" and 0 ms as "already expired".
std::chrono::milliseconds GlooTimeout(absl::Duration d);

// The time left until `deadline`, as a Gloo timeout (1 ms once it passed).
std::chrono::milliseconds GlooTimeoutUntil(std::chrono::steady_clock::time_point deadline);

// Closes every connection of `context` (errors ignored: it is called on a
// path that already failed). Each pair is closed under its lock, which its
// reads hold, so Gloo's loop thread has finished any read into a buffer
// once this returns, and reads into none after: the buffers of operations
// posted and never waited for may then be freed.
void CloseConnections(gloo::Context* context);

// For a collective whose unbound buffers are locals: declared after them,
// so destroyed before them, it closes the context's connections if the
// scope is left by an exception (a timeout, a dead peer), before the
// buffers and the memory they point into go. A collective that fails
// without throwing calls CloseConnections itself.
class CloseConnectionsOnThrow {
 public:
  explicit CloseConnectionsOnThrow(gloo::Context* context)
      : context_(context), exceptions_(std::uncaught_exceptions()) {}
  CloseConnectionsOnThrow(const CloseConnectionsOnThrow&) = delete;
  CloseConnectionsOnThrow& operator=(const CloseConnectionsOnThrow&) = delete;
  ~CloseConnectionsOnThrow() {
    if (std::uncaught_exceptions() > exceptions_) CloseConnections(context_);
  }

 private:
  gloo::Context* const context_;
  const int exceptions_;
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_GLOO_STATUS_H_
