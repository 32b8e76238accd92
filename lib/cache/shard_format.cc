#include "gradwire/lib/cache/shard_format.h"

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/lib/cache/checksum.h"

namespace gradwire {
namespace cache {
namespace {

constexpr absl::string_view kMagic("GWSHARD1", 8);
constexpr uint32_t kVersion = 1;

// Shard files are data at rest: anything malformed in them is DataLoss.
absl::Status AsDataLoss(const absl::Status& s) {
  return s.ok() ? s : absl::DataLossError(s.message());
}

}  // namespace

std::string EncodeShard(uint64_t first_index, const std::vector<std::string>& records) {
  std::string index;
  uint64_t offset = kShardHeaderBytes + records.size() * kShardIndexEntryBytes;
  for (const std::string& r : records) {
    PutFixed64(&index, offset);
    PutFixed64(&index, r.size());
    PutFixed64(&index, Checksum64(r));
    offset += r.size();
  }
  std::string out(kMagic);
  PutFixed32(&out, kVersion);
  PutFixed32(&out, static_cast<uint32_t>(records.size()));
  PutFixed64(&out, first_index);
  PutFixed64(&out, Checksum64(index));
  out += index;
  for (const std::string& r : records) out += r;
  return out;
}

absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes) {
  ByteReader in(bytes.substr(0, kShardHeaderBytes), "shard");
  absl::string_view magic;
  if (!in.ReadBytes("magic", kMagic.size(), &magic).ok() || magic != kMagic ||
      bytes.size() < kShardHeaderBytes) {
    return absl::DataLossError("shard: bad magic (not a gradwire shard, or truncated)");
  }
  uint32_t version = 0;
  ShardHeader h;
  if (absl::Status s = in.ReadFixed32("version", &version); !s.ok()) return AsDataLoss(s);
  if (version != kVersion) {
    return absl::DataLossError(absl::StrCat("shard: unsupported format version ", version));
  }
  absl::Status s = in.ReadFixed32("record count", &h.count);
  if (s.ok()) s = in.ReadFixed64("first index", &h.first_index);
  if (s.ok()) s = in.ReadFixed64("index checksum", &h.index_checksum);
  if (!s.ok()) return AsDataLoss(s);
  return h;
}

absl::StatusOr<std::vector<ShardRecord>> DecodeShardIndex(const ShardHeader& header,
                                                          absl::string_view bytes,
                                                          uint64_t file_size) {
  if (bytes.size() != header.index_bytes()) {
    return absl::DataLossError("shard: truncated index");
  }
  if (Checksum64(bytes) != header.index_checksum) {
    return absl::DataLossError("shard: index checksum mismatch");
  }
  const uint64_t data_start = kShardHeaderBytes + header.index_bytes();
  ByteReader in(bytes, "shard index");
  std::vector<ShardRecord> records(header.count);
  for (uint32_t i = 0; i < header.count; ++i) {
    ShardRecord& r = records[i];
    absl::Status s = in.ReadFixed64("record offset", &r.offset);
    if (s.ok()) s = in.ReadFixed64("record length", &r.length);
    if (s.ok()) s = in.ReadFixed64("record checksum", &r.checksum);
    if (!s.ok()) return AsDataLoss(s);
    if (r.offset < data_start || r.offset > file_size || r.length > file_size - r.offset) {
      return absl::DataLossError(absl::StrCat("shard: record ", i, " lies outside the file"));
    }
  }
  return records;
}

}  // namespace cache
}  // namespace gradwire
