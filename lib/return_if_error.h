// GRADWIRE_RETURN_IF_ERROR: early return of a non-OK absl::Status.
//
// Debian's absl (20220623) ships no status macros, and spelling the
// three-line "if (!s.ok()) return s;" out at every call hides the logic of
// the collectives, which are mostly sequences of fallible steps.
#ifndef GRADWIRE_LIB_RETURN_IF_ERROR_H_
#define GRADWIRE_LIB_RETURN_IF_ERROR_H_

#include "absl/status/status.h"

#define GRADWIRE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status gradwire_status_ = (expr);            \
    if (!gradwire_status_.ok()) return gradwire_status_; \
  } while (0)

#endif  // GRADWIRE_LIB_RETURN_IF_ERROR_H_
