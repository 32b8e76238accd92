// Converts exceptions thrown by Gloo into absl::Status at our edge.
//
// Gloo reports every failure by throwing (IoException for a dead or
// stalled peer, EnforceNotMet for a violated precondition, plain
// std::exception from the standard library). Nothing thrown may cross
// gradwire's API, so each call into Gloo is wrapped in CallGloo().
#ifndef GRADWIRE_TRANSPORT_GLOO_STATUS_H_
#define GRADWIRE_TRANSPORT_GLOO_STATUS_H_

#include <exception>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

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

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_GLOO_STATUS_H_
