// Reads IDX files (the MNIST / Fashion-MNIST format), plain or gzipped.
//
// An IDX file is a big-endian header: two zero bytes, a type code (0x08 =
// unsigned byte), the number of dimensions d, then d u32 sizes, then the
// data. Debian's dataset-fashion-mnist ships them gzip-compressed.
#ifndef GRADWIRE_TOOLS_IDX_FILE_H_
#define GRADWIRE_TOOLS_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradwire {
namespace tools {

struct IdxArray {
  std::vector<uint32_t> dims;  // dims[0] is the number of items
  std::string data;            // row-major, one byte per element

  // Bytes per item (product of dims[1..]).
  uint64_t item_bytes() const;
};

// The most bytes of one IDX file read, on disk and inflated (a gzip bomb
// is refused rather than filling memory).
inline constexpr uint64_t kMaxIdxBytes = uint64_t{4} << 30;

// Reads `path`, or `path` + ".gz" if `path` does not exist; either may be
// gzipped (one or more members, nothing after them). Only a regular file
// is read (a FIFO or directory is InvalidArgument). Only unsigned byte
// arrays (type 0x08) are accepted; a header that disagrees with the data
// size, damaged gzip data or bytes after its last member are DataLoss.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_IDX_FILE_H_
