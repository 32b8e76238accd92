// ErrnoToStatus: a failed system call as an absl::Status whose code says
// what the caller can do about it (NotFound, ResourceExhausted for a full
// disk, PermissionDenied...), not a bare Internal.
#ifndef GRADWIRE_LIB_CACHE_ERRNO_STATUS_H_
#define GRADWIRE_LIB_CACHE_ERRNO_STATUS_H_

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// "what: strerror(err)" with the absl code closest to errno's meaning.
inline absl::Status ErrnoToStatus(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case EINVAL:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_ERRNO_STATUS_H_
