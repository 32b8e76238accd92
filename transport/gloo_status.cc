#include "gradwire/transport/gloo_status.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/context.h"

namespace gradwire {
namespace transport {
namespace {

// Gloo's TCP transport words its timeouts several ways ("Timed out
// waiting", "Read timeout", "Connect timeout", "Wait timeout for key(s)").
bool MentionsTimeout(absl::string_view message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out");
}

}  // namespace

absl::Status StatusFromException(absl::string_view what, std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const gloo::IoException& ex) {
    const std::string message = absl::StrCat(what, ": ", ex.what());
    return MentionsTimeout(ex.what()) ? absl::DeadlineExceededError(message)
                                      : absl::UnavailableError(message);
  } catch (const gloo::EnforceNotMet& ex) {
    return absl::InternalError(absl::StrCat(what, ": gloo enforce failed: ", ex.what()));
  } catch (const std::exception& ex) {
    // Our own stores throw gloo::IoException; anything else reaching here
    // (bad_alloc, system_error) is not a network condition.
    return absl::InternalError(absl::StrCat(what, ": ", ex.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, ": unknown exception"));
  }
}

absl::Status CallGloo(absl::string_view what, const std::function<void()>& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (...) {
    return StatusFromException(what, std::current_exception());
  }
}

void CloseConnections(gloo::Context* context) {
  if (context == nullptr) return;
  try {
    context->closeConnections();
  } catch (...) {
  }
}

std::chrono::milliseconds GlooTimeout(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

std::chrono::milliseconds GlooTimeoutUntil(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(std::chrono::milliseconds(1), left);
}

}  // namespace transport
}  // namespace gradwire
