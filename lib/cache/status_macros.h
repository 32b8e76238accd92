// Small absl::Status helpers: Debian's abseil 20220623 ships no status
// macros, so the cache carries these two and one errno converter.
#ifndef GRADWIRE_LIB_CACHE_STATUS_MACROS_H_
#define GRADWIRE_LIB_CACHE_STATUS_MACROS_H_

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define GW_STATUS_CONCAT_INNER_(a, b) a##b
#define GW_STATUS_CONCAT_(a, b) GW_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) fails.
#define GW_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status gw_status_ = (expr);           \
    if (!gw_status_.ok()) return gw_status_;      \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or return its error.
#define GW_ASSIGN_OR_RETURN(lhs, expr) \
  GW_ASSIGN_OR_RETURN_IMPL_(GW_STATUS_CONCAT_(gw_statusor_, __LINE__), lhs, expr)
#define GW_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                              \
  if (!var.ok()) return var.status();             \
  lhs = std::move(var).value()

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

#endif  // GRADWIRE_LIB_CACHE_STATUS_MACROS_H_
