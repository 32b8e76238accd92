// A packed dataset's manifest: what a dataset version consists of.
//
// The manifest names the dataset, lists its shards (name, split, first
// sample index, sample count, size, checksum) and carries a version that is
// the checksum of everything else. Caches record the version in every entry
// and servers check it on every request, so bytes of one version are never
// served to a reader pinned to another: changing any shard changes the
// version.
//
// Samples are addressed by key "<split>/<index>" (e.g. "train/59999");
// whole shards by their name (e.g. "train-00011.gws").
//
// Text form, one record per line:
//   gradwire-manifest 1
//   dataset fashion-mnist
//   version 0123456789abcdef
//   shard train-00000.gws train 0 5000 3925272 89abcdef01234567
#ifndef GRADWIRE_LIB_CACHE_MANIFEST_H_
#define GRADWIRE_LIB_CACHE_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

struct ShardInfo {
  std::string name;          // file name, also the shard's key
  std::string split;         // "train", "test", ...
  uint64_t first_index = 0;  // index of its first sample within the split
  uint64_t count = 0;        // samples in the shard
  uint64_t bytes = 0;        // file size
  uint64_t checksum = 0;     // XXH64 of the whole file
};

struct SampleLocation {
  size_t shard = 0;     // index into Manifest::shards()
  uint64_t record = 0;  // record within that shard
};

class Manifest {
 public:
  static constexpr absl::string_view kFileName = "MANIFEST";

  // Builds a manifest and computes its version. Fails on bad names (empty,
  // containing '/' or whitespace), duplicate shards, overlapping samples,
  // a shard claiming more samples than its bytes can index (shard_format.h:
  // (bytes - 32) / 24), a shard's sample range past 2^64 - 1, or bytes
  // adding up past it.
  static absl::StatusOr<Manifest> Create(std::string dataset_id, std::vector<ShardInfo> shards);

  // Parses the text form; DataLoss if the version does not match the
  // content (a damaged or hand-edited manifest).
  static absl::StatusOr<Manifest> Parse(absl::string_view text);

  std::string Serialize() const;

  const std::string& dataset_id() const { return dataset_id_; }
  uint64_t version() const { return version_; }
  const std::vector<ShardInfo>& shards() const { return shards_; }

  // Total bytes of all shards, and samples in all splits.
  uint64_t total_bytes() const;
  uint64_t num_samples() const;

  // Every sample key of `split` (all splits if empty), in index order.
  std::vector<std::string> SampleKeys(absl::string_view split = "") const;

  static std::string SampleKey(absl::string_view split, uint64_t index);

  // Where sample `key` lives; NotFound if no shard holds it.
  absl::StatusOr<SampleLocation> LocateSample(absl::string_view key) const;

  // The shard named `name`, or nullptr.
  const ShardInfo* FindShard(absl::string_view name) const;

 private:
  static std::string Body(absl::string_view dataset_id, const std::vector<ShardInfo>& shards);

  std::string dataset_id_;
  uint64_t version_ = 0;
  std::vector<ShardInfo> shards_;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_MANIFEST_H_
