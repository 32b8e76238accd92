#include "gradwire/lib/cache/dataset_packer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/errno_status.h"
#include "gradwire/lib/cache/shard_format.h"

namespace gradwire {
namespace cache {

namespace {

// The shards that out_dir's current MANIFEST names and `next` does not:
// a re-pack into the same directory removes them once its own MANIFEST is
// in place, so that no shard of the old dataset is left behind. Files no
// manifest names are never touched, and a directory without a readable,
// valid MANIFEST gives none.
std::vector<std::string> ShardsOnlyTheOldManifestNames(const std::string& out_dir,
                                                       const Manifest& next) {
  absl::StatusOr<std::string> text =
      ReadWholeFile(absl::StrCat(out_dir, "/", Manifest::kFileName));
  if (!text.ok()) return {};
  absl::StatusOr<Manifest> old = Manifest::Parse(*text);
  if (!old.ok()) return {};
  std::vector<std::string> stale;
  for (const ShardInfo& shard : old->shards()) {
    if (next.FindShard(shard.name) == nullptr) stale.push_back(shard.name);
  }
  return stale;
}

}  // namespace

absl::StatusOr<Manifest> PackDataset(const std::string& out_dir, const std::string& dataset_id,
                                     const std::vector<SplitRecords>& splits,
                                     size_t samples_per_shard) {
  if (samples_per_shard == 0 || samples_per_shard > UINT32_MAX) {
    return absl::InvalidArgumentError("samples_per_shard must be in [1, 2^32)");
  }
  // Everything the manifest will check (the dataset id, split and shard
  // names, counts) is checked before the first file is written: a split
  // named "../x" or holding a NUL once wrote a shard outside out_dir, and
  // a refused re-pack left new shards under the old MANIFEST. The sizes
  // here are what EncodeShard writes, header, index and records.
  {
    std::vector<ShardInfo> planned;
    for (const SplitRecords& split : splits) {
      if (split.split.find('\0') != std::string::npos) {
        return absl::InvalidArgumentError("pack: a split name holds a NUL byte");
      }
      for (size_t first = 0; first < split.records.size(); first += samples_per_shard) {
        const size_t end = std::min(split.records.size(), first + samples_per_shard);
        ShardInfo info;
        info.name = absl::StrFormat("%s-%05d.gws", split.split, first / samples_per_shard);
        info.split = split.split;
        info.first_index = first;
        info.count = end - first;
        info.bytes = kShardHeaderBytes + info.count * kShardIndexEntryBytes;
        for (size_t i = first; i < end; ++i) info.bytes += split.records[i].size();
        planned.push_back(std::move(info));
      }
    }
    if (dataset_id.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("pack: the dataset id holds a NUL byte");
    }
    GRADWIRE_RETURN_IF_ERROR(Manifest::Create(dataset_id, std::move(planned)).status());
  }
  if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoToStatus(absl::StrCat("create ", out_dir), errno);
  }
  std::vector<ShardInfo> shards;
  for (const SplitRecords& split : splits) {
    for (size_t first = 0; first < split.records.size(); first += samples_per_shard) {
      size_t end = std::min(split.records.size(), first + samples_per_shard);
      std::vector<std::string> records(split.records.begin() + first, split.records.begin() + end);
      std::string bytes = EncodeShard(first, records);
      ShardInfo info;
      info.name = absl::StrFormat("%s-%05d.gws", split.split, first / samples_per_shard);
      info.split = split.split;
      info.first_index = first;
      info.count = records.size();
      info.bytes = bytes.size();
      info.checksum = Checksum64(bytes);
      GRADWIRE_RETURN_IF_ERROR(WriteFileAtomically(out_dir, info.name, bytes));
      shards.push_back(std::move(info));
    }
  }
  GRADWIRE_ASSIGN_OR_RETURN(Manifest manifest, Manifest::Create(dataset_id, std::move(shards)));
  const std::vector<std::string> stale = ShardsOnlyTheOldManifestNames(out_dir, manifest);
  GRADWIRE_RETURN_IF_ERROR(
      WriteFileAtomically(out_dir, std::string(Manifest::kFileName), manifest.Serialize()));
  for (const std::string& name : stale) {
    const std::string path = absl::StrCat(out_dir, "/", name);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus(absl::StrCat("remove the previous pack's shard ", path), errno);
    }
  }
  return manifest;
}

}  // namespace cache
}  // namespace gradwire
