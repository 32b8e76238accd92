// Packs a dataset's records into shard files plus a manifest.
//
// Shards are published atomically (atomic_file.h) and the manifest last,
// so a directory with a MANIFEST always holds the shards it names; a pack
// that dies part-way leaves no manifest (or the previous one, whose shards
// then fail their checksums instead of being served).
#ifndef GRADWIRE_LIB_CACHE_DATASET_PACKER_H_
#define GRADWIRE_LIB_CACHE_DATASET_PACKER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gradwire/lib/cache/manifest.h"

namespace gradwire {
namespace cache {

struct SplitRecords {
  std::string split;                 // "train", "test"
  std::vector<std::string> records;  // sample i of the split is records[i]
};

// Writes "<split>-<nnnnn>.gws" shards of at most samples_per_shard records
// and a MANIFEST into out_dir (created if missing). Packing again into the
// same directory replaces the dataset: once the new MANIFEST is written,
// the shards that only the previous MANIFEST named are removed (files that
// neither names are left alone). A split may be empty; it then has no
// shards.
absl::StatusOr<Manifest> PackDataset(const std::string& out_dir, const std::string& dataset_id,
                                     const std::vector<SplitRecords>& splits,
                                     size_t samples_per_shard);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DATASET_PACKER_H_
