// GRADWIRE_RETURN_IF_ERROR / GRADWIRE_ASSIGN_OR_RETURN: early return of a
// non-OK absl::Status or absl::StatusOr. The one copy of these in gradwire.
//
// Debian's absl (20220623) ships no status macros, and spelling the
// three-line "if (!s.ok()) return s;" out at every call hides the logic of
// the collectives, which are mostly sequences of fallible steps.
#ifndef GRADWIRE_BASE_STATUS_MACROS_H_
#define GRADWIRE_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GRADWIRE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status gradwire_status_ = (expr);            \
    if (!gradwire_status_.ok()) return gradwire_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or return its error.
#define GRADWIRE_ASSIGN_OR_RETURN(lhs, expr) \
  GRADWIRE_ASSIGN_OR_RETURN_IMPL_(GRADWIRE_STATUS_CONCAT_(gradwire_statusor_, __LINE__), lhs, expr)
#define GRADWIRE_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                                    \
  if (!var.ok()) return var.status();                   \
  lhs = std::move(var).value()
#define GRADWIRE_STATUS_CONCAT_INNER_(a, b) a##b
#define GRADWIRE_STATUS_CONCAT_(a, b) GRADWIRE_STATUS_CONCAT_INNER_(a, b)

#endif  // GRADWIRE_BASE_STATUS_MACROS_H_
