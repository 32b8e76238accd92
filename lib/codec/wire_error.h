// The error every check of wire_format.h's parsers returns (private to the
// wire_format library: wire_format.cc and index_coding.cc), so that a
// frame's and an index section's messages read alike.
#ifndef GRADWIRE_LIB_CODEC_WIRE_ERROR_H_
#define GRADWIRE_LIB_CODEC_WIRE_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace wire_internal {

// InvalidArgument("wire frame: <what>").
inline absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("wire frame: ", what));
}

}  // namespace wire_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_WIRE_ERROR_H_
