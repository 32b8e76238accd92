#include "python_spec.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gradwire {
namespace python {

std::vector<std::string> SettingsOf(Method method) {
  switch (method) {
    case Method::kNone:
      return {};  // lossless: nothing to select, quantize or feed back
    case Method::kFp16:
    case Method::kBf16:
      return {"ef"};
    case Method::kTopK:
    case Method::kApproxTopK:
      return {"ratio", "ef", "values", "indices"};
    case Method::kRandomK:
      // The indices come from the shared seed: none are sent.
      return {"ratio", "ef", "seed", "values"};
    case Method::kQsgd:
      return {"bits", "bucket", "seed", "ef"};
    case Method::kSign:
      return {"bucket", "ef"};
  }
  return {};
}

absl::StatusOr<CompressionSpec> ParseSpec(absl::string_view text) {
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
  if (!spec.ok()) return spec.status();
  text = absl::StripAsciiWhitespace(text);
  if (spec->ToString() == text) return spec;  // canonical: names every setting
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) return spec;
  const std::vector<std::string> used = SettingsOf(spec->method);
  for (absl::string_view item : absl::StrSplit(text.substr(colon + 1), ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    if (std::find(used.begin(), used.end(), key) != used.end()) continue;
    const absl::string_view method = MethodName(spec->method);
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", key, " does not apply to method ", method, " in spec \"", text, "\" (",
        used.empty() ? absl::StrCat(method, " takes no settings")
                     : absl::StrCat(method, " takes: ", absl::StrJoin(used, ", ")),
        ")"));
  }
  return spec;
}

}  // namespace python
}  // namespace gradwire
