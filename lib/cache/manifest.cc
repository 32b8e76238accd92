#include "gradwire/lib/cache/manifest.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/shard_format.h"

namespace gradwire {
namespace cache {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\0') return false;
  }
  return true;
}

}  // namespace

std::string Manifest::Body(absl::string_view dataset_id, const std::vector<ShardInfo>& shards) {
  std::string body = absl::StrCat("dataset ", dataset_id, "\n");
  for (const ShardInfo& s : shards) {
    absl::StrAppend(&body, "shard ", s.name, " ", s.split, " ", s.first_index, " ", s.count, " ",
                    s.bytes, " ", ChecksumToHex(s.checksum), "\n");
  }
  return body;
}

absl::StatusOr<Manifest> Manifest::Create(std::string dataset_id, std::vector<ShardInfo> shards) {
  if (!ValidName(dataset_id)) {
    return absl::InvalidArgumentError(absl::StrCat("manifest: bad dataset id '", dataset_id, "'"));
  }
  std::set<std::string> names;
  uint64_t bytes_so_far = 0;
  for (const ShardInfo& s : shards) {
    if (!ValidName(s.name) || !ValidName(s.split) || s.name == kFileName) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest: bad shard name or split '", s.name, "' / '", s.split, "'"));
    }
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("manifest: duplicate shard ", s.name));
    }
    // What the shard's file can hold: its header and an index entry per
    // sample (shard_format.h). A count beyond it, or a range of sample
    // indices past 2^64 - 1, is no shard EncodeShard writes, and would make
    // every sum and key below wrap.
    if (s.bytes < kShardHeaderBytes ||
        s.count > (s.bytes - kShardHeaderBytes) / kShardIndexEntryBytes) {
      return absl::InvalidArgumentError(absl::StrCat("manifest: shard ", s.name, " claims ",
                                                     s.count, " samples in ", s.bytes, " bytes"));
    }
    if (s.count > std::numeric_limits<uint64_t>::max() - s.first_index) {
      return absl::InvalidArgumentError(absl::StrCat("manifest: shard ", s.name, "'s samples ",
                                                     s.first_index, " + ", s.count,
                                                     " pass 2^64 - 1"));
    }
    if (s.bytes > std::numeric_limits<uint64_t>::max() - bytes_so_far) {
      return absl::InvalidArgumentError("manifest: the shards' bytes add up past 2^64 - 1");
    }
    bytes_so_far += s.bytes;
  }
  // Sorted by (split, first_index) so LocateSample can binary-search and
  // overlaps are adjacent.
  std::sort(shards.begin(), shards.end(), [](const ShardInfo& a, const ShardInfo& b) {
    return std::tie(a.split, a.first_index) < std::tie(b.split, b.first_index);
  });
  for (size_t i = 1; i < shards.size(); ++i) {
    const ShardInfo& a = shards[i - 1];
    const ShardInfo& b = shards[i];
    if (a.split == b.split && a.first_index + a.count > b.first_index) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest: shards ", a.name, " and ", b.name, " overlap"));
    }
  }
  Manifest m;
  m.dataset_id_ = std::move(dataset_id);
  m.shards_ = std::move(shards);
  m.version_ = Checksum64(Body(m.dataset_id_, m.shards_));
  return m;
}

std::string Manifest::Serialize() const {
  std::string body = Body(dataset_id_, shards_);
  // The version line goes after "dataset" so the file reads top-down.
  size_t first_line = body.find('\n') + 1;
  return absl::StrCat("gradwire-manifest 1\n", body.substr(0, first_line), "version ",
                      ChecksumToHex(version_), "\n", body.substr(first_line));
}

absl::StatusOr<Manifest> Manifest::Parse(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  auto bad = [](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("manifest: ", why));
  };
  if (lines.size() < 3 || lines[0] != "gradwire-manifest 1") return bad("missing header line");
  std::vector<absl::string_view> dataset = absl::StrSplit(lines[1], ' ');
  if (dataset.size() != 2 || dataset[0] != "dataset") return bad("missing 'dataset' line");
  std::vector<absl::string_view> version = absl::StrSplit(lines[2], ' ');
  uint64_t declared = 0;
  if (version.size() != 2 || version[0] != "version" || !ChecksumFromHex(version[1], &declared)) {
    return bad("missing or malformed 'version' line");
  }
  std::vector<ShardInfo> shards;
  for (size_t i = 3; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    ShardInfo s;
    if (f.size() != 7 || f[0] != "shard" || !absl::SimpleAtoi(f[3], &s.first_index) ||
        !absl::SimpleAtoi(f[4], &s.count) || !absl::SimpleAtoi(f[5], &s.bytes) ||
        !ChecksumFromHex(f[6], &s.checksum)) {
      return bad(absl::StrCat("malformed line ", i + 1, ": '", lines[i], "'"));
    }
    s.name = std::string(f[1]);
    s.split = std::string(f[2]);
    shards.push_back(std::move(s));
  }
  absl::StatusOr<Manifest> m = Create(std::string(dataset[1]), std::move(shards));
  if (!m.ok()) return bad(m.status().message());
  if (m->version_ != declared) {
    return bad(absl::StrCat("version ", ChecksumToHex(declared), " does not match content (",
                            ChecksumToHex(m->version_), ")"));
  }
  return m;
}

uint64_t Manifest::total_bytes() const {
  uint64_t total = 0;
  for (const ShardInfo& s : shards_) total += s.bytes;
  return total;
}

uint64_t Manifest::num_samples() const {
  uint64_t total = 0;
  for (const ShardInfo& s : shards_) total += s.count;
  return total;
}

std::string Manifest::SampleKey(absl::string_view split, uint64_t index) {
  return absl::StrCat(split, "/", index);
}

std::vector<std::string> Manifest::SampleKeys(absl::string_view split) const {
  std::vector<std::string> keys;
  uint64_t count = 0;
  for (const ShardInfo& s : shards_) {
    if (split.empty() || s.split == split) count += s.count;
  }
  // All at once: a count no memory holds fails here (std::bad_alloc),
  // not after the keys filled the machine's memory one by one.
  keys.reserve(count);
  for (const ShardInfo& s : shards_) {
    if (!split.empty() && s.split != split) continue;
    for (uint64_t i = 0; i < s.count; ++i) keys.push_back(SampleKey(s.split, s.first_index + i));
  }
  return keys;
}

absl::StatusOr<SampleLocation> Manifest::LocateSample(absl::string_view key) const {
  size_t slash = key.find('/');
  uint64_t index = 0;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(key.substr(slash + 1), &index)) {
    return absl::NotFoundError(absl::StrCat("no sample '", key, "' (keys are <split>/<index>)"));
  }
  absl::string_view split = key.substr(0, slash);
  // One spelling per sample: "train/007" is not "train/7".
  if (SampleKey(split, index) != key) {
    return absl::NotFoundError(absl::StrCat("no sample '", key, "' (non-canonical index)"));
  }
  // Last shard of `split` starting at or before `index`.
  auto it =
      std::upper_bound(shards_.begin(), shards_.end(), std::make_pair(split, index),
                       [](const std::pair<absl::string_view, uint64_t>& k, const ShardInfo& s) {
                         absl::string_view ss = s.split;
                         return k.first < ss || (k.first == ss && k.second < s.first_index);
                       });
  if (it != shards_.begin()) {
    --it;
    if (it->split == split && index >= it->first_index && index < it->first_index + it->count) {
      return SampleLocation{static_cast<size_t>(it - shards_.begin()), index - it->first_index};
    }
  }
  return absl::NotFoundError(absl::StrCat("no sample '", key, "' in dataset ", dataset_id_));
}

const ShardInfo* Manifest::FindShard(absl::string_view name) const {
  for (const ShardInfo& s : shards_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace cache
}  // namespace gradwire
