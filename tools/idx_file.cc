#include "gradwire/tools/idx_file.h"

#include <unistd.h>
#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace tools {

uint64_t IdxArray::item_bytes() const {
  uint64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::string actual = path;
  if (access(actual.c_str(), R_OK) != 0) actual = path + ".gz";
  // gzopen reads plain files as they are, so one path serves both forms.
  gzFile file = gzopen(actual.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path, "[.gz]"));
  std::string bytes;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) bytes.append(buffer, n);
  int err = 0;
  const char* message = gzerror(file, &err);
  std::string error_text = (n < 0 && message != nullptr) ? message : "";
  gzclose(file);
  if (n < 0) return absl::DataLossError(absl::StrCat(actual, ": ", error_text));

  auto u32 = [&](size_t at) {
    return (uint32_t{static_cast<uint8_t>(bytes[at])} << 24) |
           (uint32_t{static_cast<uint8_t>(bytes[at + 1])} << 16) |
           (uint32_t{static_cast<uint8_t>(bytes[at + 2])} << 8) |
           uint32_t{static_cast<uint8_t>(bytes[at + 3])};
  };
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0) {
    return absl::DataLossError(absl::StrCat(actual, ": not an IDX file"));
  }
  if (static_cast<uint8_t>(bytes[2]) != 0x08) {
    return absl::InvalidArgumentError(
        absl::StrCat(actual, ": only unsigned-byte IDX is supported"));
  }
  size_t d = static_cast<uint8_t>(bytes[3]);
  if (d == 0 || bytes.size() < 4 + 4 * d) {
    return absl::DataLossError(absl::StrCat(actual, ": truncated IDX header"));
  }
  IdxArray out;
  const uint64_t data_bytes = bytes.size() - (4 + 4 * d);
  uint64_t total = 1;
  for (size_t i = 0; i < d; ++i) {
    out.dims.push_back(u32(4 + 4 * i));
    // Refused before the product could wrap: dimensions whose product
    // wraps to the file's size would pass the check below and send every
    // reader past the data.
    if (out.dims.back() != 0 && total > data_bytes / out.dims.back()) {
      return absl::DataLossError(absl::StrCat(actual, ": header's dimensions promise more than ",
                                              "the file's ", data_bytes, " bytes of data"));
    }
    total *= out.dims.back();
  }
  if (data_bytes != total) {
    return absl::DataLossError(absl::StrCat(actual, ": header promises ", total,
                                            " bytes of data, file has ",
                                            bytes.size() - (4 + 4 * d)));
  }
  out.data = bytes.substr(4 + 4 * d);
  return out;
}

}  // namespace tools
}  // namespace gradwire
