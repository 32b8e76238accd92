#include "gradwire/lib/cache/data_source.h"

namespace gradwire {
namespace cache {

std::vector<absl::StatusOr<Blob>> DataSource::GetBatch(absl::Span<const std::string> keys) {
  std::vector<absl::StatusOr<Blob>> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(Get(key));
  return out;
}

}  // namespace cache
}  // namespace gradwire
