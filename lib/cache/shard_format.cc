#include "gradwire/lib/cache/shard_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/checksum.h"

namespace gradwire {
namespace cache {
namespace {

constexpr char kMagic[8] = {'G', 'W', 'S', 'H', 'A', 'R', 'D', '1'};

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

std::string EncodeShard(uint64_t first_index, const std::vector<std::string>& records) {
  std::string index;
  uint64_t offset = kShardHeaderBytes + records.size() * kShardIndexEntryBytes;
  for (const std::string& r : records) {
    PutU64(&index, offset);
    PutU64(&index, r.size());
    PutU64(&index, Checksum64(r));
    offset += r.size();
  }
  std::string out(kMagic, sizeof(kMagic));
  PutU32(&out, 1);
  PutU32(&out, static_cast<uint32_t>(records.size()));
  PutU64(&out, first_index);
  PutU64(&out, Checksum64(index));
  out += index;
  for (const std::string& r : records) out += r;
  return out;
}

absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes) {
  if (bytes.size() < kShardHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("shard: bad magic (not a gradwire shard, or truncated)");
  }
  if (GetLE(bytes.data() + 8, 4) != 1) {
    return absl::DataLossError(
        absl::StrCat("shard: unsupported format version ", GetLE(bytes.data() + 8, 4)));
  }
  ShardHeader h;
  h.count = static_cast<uint32_t>(GetLE(bytes.data() + 12, 4));
  h.first_index = GetLE(bytes.data() + 16, 8);
  h.index_checksum = GetLE(bytes.data() + 24, 8);
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
  uint64_t data_start = kShardHeaderBytes + header.index_bytes();
  std::vector<ShardRecord> records(header.count);
  for (uint32_t i = 0; i < header.count; ++i) {
    const char* p = bytes.data() + uint64_t{i} * kShardIndexEntryBytes;
    ShardRecord& r = records[i];
    r.offset = GetLE(p, 8);
    r.length = GetLE(p + 8, 8);
    r.checksum = GetLE(p + 16, 8);
    if (r.offset < data_start || r.offset > file_size || r.length > file_size - r.offset) {
      return absl::DataLossError(absl::StrCat("shard: record ", i, " lies outside the file"));
    }
  }
  return records;
}

}  // namespace cache
}  // namespace gradwire
