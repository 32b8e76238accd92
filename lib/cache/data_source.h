// A DataSource is where the cache gets bytes it does not hold: the remote
// tier (a gRPC data server, remote_tier.h) or a plain directory of packed
// shards such as an NFS mount (directory_source.h).
//
// Sources serve one dataset version, described by their manifest, and
// return exactly the bytes that version holds under a key, verified
// against the checksums the packer recorded, or a clear error:
// NotFound (no such key), DataLoss (the stored bytes are damaged),
// Unavailable / DeadlineExceeded (the source cannot be reached in time).
#ifndef GRADWIRE_LIB_CACHE_DATA_SOURCE_H_
#define GRADWIRE_LIB_CACHE_DATA_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/cache/manifest.h"

namespace gradwire {
namespace cache {

// Immutable bytes shared by every tier and reader holding them: eviction
// drops the tier's reference, never the bytes a reader is still using.
using Blob = std::shared_ptr<const std::string>;

inline Blob MakeBlob(std::string bytes) {
  return std::make_shared<const std::string>(std::move(bytes));
}

class DataSource {
 public:
  virtual ~DataSource() = default;

  // The dataset version this source serves.
  virtual const Manifest& manifest() const = 0;

  // A sample ("<split>/<index>") or a whole shard (its name).
  virtual absl::StatusOr<Blob> Get(absl::string_view key) = 0;

  // One result per key, in order. Sources with per-call latency (remote)
  // override this to fetch many keys in one round trip.
  virtual std::vector<absl::StatusOr<Blob>> GetBatch(absl::Span<const std::string> keys);

  // For logs and statistics: "grpc://host:port", "dir:/mnt/data".
  virtual std::string Describe() const = 0;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DATA_SOURCE_H_
