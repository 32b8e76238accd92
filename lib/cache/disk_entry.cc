#include "gradwire/lib/cache/disk_entry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"

namespace gradwire {
namespace cache {
namespace {

constexpr absl::string_view kMagic("GWCACHE1", 8);
constexpr size_t kCoveredHeaderBytes = 40;  // bytes 0..39 (before the header checksum)

uint64_t HeaderChecksum(absl::string_view first40, absl::string_view key) {
  Checksum64Stream sum;
  sum.Update(first40);
  sum.Update(key);
  return sum.Digest();
}

}  // namespace

std::string EncodeEntryHead(absl::string_view key, uint64_t version, absl::string_view value) {
  std::string out(kMagic);
  PutFixed32(&out, static_cast<uint32_t>(key.size()));
  PutFixed32(&out, 0);
  PutFixed64(&out, version);
  PutFixed64(&out, value.size());
  PutFixed64(&out, Checksum64(value));
  PutFixed64(&out, HeaderChecksum(out, key));
  PutBytes(&out, key);
  return out;
}

absl::StatusOr<EntryHeader> ParseEntryHead(absl::string_view head, uint64_t file_size) {
  ByteReader in(head, "disk entry");
  absl::string_view magic;
  if (!in.ReadBytes("magic", kMagic.size(), &magic).ok() || magic != kMagic ||
      head.size() < kEntryHeaderBytes) {
    return absl::DataLossError("bad magic or truncated header");
  }
  uint32_t key_length = 0, reserved = 0;
  uint64_t header_checksum = 0;
  EntryHeader h;
  // Bounds were checked above: these reads cannot fail.
  in.ReadFixed32("key length", &key_length).IgnoreError();
  in.ReadFixed32("reserved", &reserved).IgnoreError();
  in.ReadFixed64("dataset version", &h.version).IgnoreError();
  in.ReadFixed64("value length", &h.value_length).IgnoreError();
  in.ReadFixed64("value checksum", &h.value_checksum).IgnoreError();
  in.ReadFixed64("header checksum", &header_checksum).IgnoreError();
  absl::string_view key;
  if (reserved != 0 || key_length > kMaxEntryKeyBytes ||
      !in.ReadBytes("key", key_length, &key).ok()) {
    return absl::DataLossError("bad key length");
  }
  if (HeaderChecksum(head.substr(0, kCoveredHeaderBytes), key) != header_checksum) {
    return absl::DataLossError("header checksum mismatch");
  }
  h.key = std::string(key);
  if (h.value_length > file_size || file_size - h.value_length != h.value_offset()) {
    return absl::DataLossError(absl::StrCat("file has ", file_size, " bytes, header promises ",
                                            h.value_offset(), " + ", h.value_length));
  }
  return h;
}

absl::StatusOr<EntryHeader> ReadEntryHeader(int fd, uint64_t file_size) {
  std::string head(std::min<uint64_t>(file_size, kEntryHeaderBytes + kMaxEntryKeyBytes), '\0');
  GRADWIRE_RETURN_IF_ERROR(ReadFileAt(fd, 0, head.size(), &head[0], "entry header"));
  return ParseEntryHead(head, file_size);
}

absl::StatusOr<std::string> ReadEntryValue(int fd, const EntryHeader& header) {
  std::string value(header.value_length, '\0');
  GRADWIRE_RETURN_IF_ERROR(
      ReadFileAt(fd, header.value_offset(), value.size(), &value[0], "entry value"));
  if (Checksum64(value) != header.value_checksum) {
    return absl::DataLossError("value checksum mismatch");
  }
  return value;
}

absl::Status VerifyEntryValue(int fd, const EntryHeader& header) {
  constexpr uint64_t kPiece = 1 << 20;
  std::string piece(std::min(kPiece, header.value_length), '\0');
  Checksum64Stream sum;
  for (uint64_t done = 0; done < header.value_length;) {
    const size_t n = static_cast<size_t>(std::min(kPiece, header.value_length - done));
    GRADWIRE_RETURN_IF_ERROR(
        ReadFileAt(fd, header.value_offset() + done, n, &piece[0], "entry value"));
    sum.Update(absl::string_view(piece.data(), n));
    done += n;
  }
  if (sum.Digest() != header.value_checksum) {
    return absl::DataLossError("value checksum mismatch");
  }
  return absl::OkStatus();
}

}  // namespace cache
}  // namespace gradwire
