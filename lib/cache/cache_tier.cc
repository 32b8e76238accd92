#include "gradwire/lib/cache/cache_tier.h"

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace cache {

absl::string_view EvictionPolicyName(EvictionPolicy policy) {
  switch (policy) {
    case EvictionPolicy::kFillOnce:
      return "fill_once";
    case EvictionPolicy::kLru:
      return "lru";
  }
  return "unknown";
}

absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name) {
  if (name == "fill_once") return EvictionPolicy::kFillOnce;
  if (name == "lru") return EvictionPolicy::kLru;
  return absl::InvalidArgumentError(
      absl::StrCat("--cache_policy: '", name, "' is not one of fill_once, lru"));
}

}  // namespace cache
}  // namespace gradwire
