// The disk tier's entry file: one cached object, self-describing and
// checksummed, named by DiskTier::EntryFileName(version, key).
//
//   offset 0   "GWCACHE1"                                  8 bytes
//          8   key length k, u32 LE (at most kMaxEntryKeyBytes)
//         12   0, u32 LE (reserved)
//         16   dataset version, u64 LE
//         24   value length, u64 LE
//         32   XXH64 of the value, u64 LE
//         40   XXH64 of bytes 0..39 followed by the key, u64 LE
//         48   key (k bytes), then the value
//
// Readers check the header before touching the value: the file is opened,
// at most 48 + kMaxEntryKeyBytes bytes are read and checked (magic, key
// length, header checksum, and a file size equal to what the header
// promises), and only then is the value read. A file of any size that is
// not an entry (a 2 GiB sparse file, a truncated write) costs one small
// read, never a read of the whole file.
#ifndef GRADWIRE_LIB_CACHE_DISK_ENTRY_H_
#define GRADWIRE_LIB_CACHE_DISK_ENTRY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

inline constexpr size_t kEntryHeaderBytes = 48;
inline constexpr size_t kMaxEntryKeyBytes = 4096;

struct EntryHeader {
  std::string key;
  uint64_t version = 0;
  uint64_t value_length = 0;
  uint64_t value_checksum = 0;

  uint64_t value_offset() const { return kEntryHeaderBytes + key.size(); }
  uint64_t file_bytes() const { return value_offset() + value_length; }
};

// The header and key of an entry holding `value`; the value follows them.
// The caller keeps key.size() <= kMaxEntryKeyBytes.
std::string EncodeEntryHead(absl::string_view key, uint64_t version, absl::string_view value);

// Checks the header and key at the start of an entry file of `file_size`
// bytes; `head` holds at least its first min(file_size, 48 + k) bytes.
// DataLoss for anything inconsistent.
absl::StatusOr<EntryHeader> ParseEntryHead(absl::string_view head, uint64_t file_size);

// Reads (at most 48 + kMaxEntryKeyBytes bytes) and checks the header of
// the entry file open at `fd`, `file_size` bytes long.
absl::StatusOr<EntryHeader> ReadEntryHeader(int fd, uint64_t file_size);

// Reads the value of a checked header and verifies its checksum (DataLoss
// on mismatch).
absl::StatusOr<std::string> ReadEntryValue(int fd, const EntryHeader& header);

// Verifies the value's checksum reading it in bounded pieces, keeping
// nothing: what Open does to every entry with verify_on_open.
absl::Status VerifyEntryValue(int fd, const EntryHeader& header);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DISK_ENTRY_H_
