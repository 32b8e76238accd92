// The job token that authorizes calls to a data server: one rule for the
// server reading its token file and for every client (RemoteTier, the
// Python binding), so the same bytes always make the same token.
//
// ASCII whitespace at both ends is stripped (a token read with
// open(path).read() equals the one typed without its newline); what
// remains must be 1 to kMaxTokenBytes bytes of printable ASCII without
// spaces (0x21-0x7e). Anything else is refused with InvalidArgument, never
// handed to gRPC, which aborts the process on metadata it considers
// invalid. Errors never quote the token.
#ifndef GRADWIRE_LIB_CACHE_TOKEN_H_
#define GRADWIRE_LIB_CACHE_TOKEN_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

inline constexpr size_t kMaxTokenBytes = 4096;

// The token `raw` stands for, or InvalidArgument saying what is wrong.
absl::StatusOr<std::string> NormalizeToken(absl::string_view raw);

// NormalizeToken of a file's content; errors name the file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_TOKEN_H_
