// The shard file: a fixed header, an index of records, then the records.
//
//   offset 0   "GWSHARD1"                       8 bytes
//          8   format version (1), u32 LE
//         12   record count n, u32 LE
//         16   index of the first record within its split, u64 LE
//         24   XXH64 of the index table, u64 LE
//         32   n x { offset u64, length u64, XXH64 of the record u64 }
//         ...  record bytes (offsets are from the start of the file)
//
// Per-record checksums let a reader that fetches one sample (pread from a
// plain directory, or a server answering by key) verify just that sample;
// the manifest's whole-file checksum covers the rest.
#ifndef GRADWIRE_LIB_CACHE_SHARD_FORMAT_H_
#define GRADWIRE_LIB_CACHE_SHARD_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

inline constexpr size_t kShardHeaderBytes = 32;
inline constexpr size_t kShardIndexEntryBytes = 24;

struct ShardRecord {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t checksum = 0;
};

struct ShardHeader {
  uint32_t count = 0;
  uint64_t first_index = 0;
  uint64_t index_checksum = 0;

  uint64_t index_bytes() const { return uint64_t{count} * kShardIndexEntryBytes; }
};

// The whole shard file for `records` (sample first_index, first_index+1, ...).
std::string EncodeShard(uint64_t first_index, const std::vector<std::string>& records);

// Decodes the first kShardHeaderBytes of a shard file; DataLoss if invalid.
absl::StatusOr<ShardHeader> DecodeShardHeader(absl::string_view bytes);

// Decodes and verifies the index table (the header.index_bytes() bytes after
// the header) of a file of `file_size` bytes: checksum, and every record
// lying within the file after the index. DataLoss on any violation.
absl::StatusOr<std::vector<ShardRecord>> DecodeShardIndex(const ShardHeader& header,
                                                          absl::string_view bytes,
                                                          uint64_t file_size);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_SHARD_FORMAT_H_
