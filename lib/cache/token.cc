#include "gradwire/lib/cache/token.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/atomic_file.h"

namespace gradwire {
namespace cache {

absl::StatusOr<std::string> NormalizeToken(absl::string_view raw) {
  absl::string_view token = absl::StripAsciiWhitespace(raw);
  if (token.empty()) return absl::InvalidArgumentError("token is empty");
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token is ", token.size(), " bytes, more than the ", kMaxTokenBytes, " allowed"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("token byte ", i,
                       " is not printable ASCII (tokens are 0x21-0x7e: no "
                       "spaces, control bytes or non-ASCII characters)"));
    }
  }
  return std::string(token);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  // Room for the token, surrounding whitespace and a line end or two.
  absl::StatusOr<std::string> text = ReadWholeFile(path, 2 * kMaxTokenBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> token = NormalizeToken(*text);
  if (!token.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", token.status().message()));
  }
  return token;
}

}  // namespace cache
}  // namespace gradwire
