#include "gradwire/tools/idx_file.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/atomic_file.h"

namespace gradwire {
namespace tools {

uint64_t IdxArray::item_bytes() const {
  uint64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

// Inflates the gzip members of `in` one after another (gzip -c a b > c is
// one file). Bytes after the last member that do not begin another one
// are DataLoss: gzread ignored them, so a damaged file could pass.
absl::StatusOr<std::string> Gunzip(const std::string& in, const std::string& name) {
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(name, ": inflateInit2 failed"));
  }
  size_t at = 0;
  char buffer[1 << 16];
  absl::Status status;
  while (status.ok() && at < in.size()) {
    if (in.size() - at < 2 || static_cast<uint8_t>(in[at]) != 0x1f ||
        static_cast<uint8_t>(in[at + 1]) != 0x8b) {
      status = absl::DataLossError(
          absl::StrCat(name, ": ", in.size() - at, " bytes after the last gzip member"));
      break;
    }
    inflateReset(&z);
    int rc = Z_OK;
    while (rc == Z_OK) {
      const size_t chunk = std::min<size_t>(in.size() - at, 1u << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + at));
      z.avail_in = static_cast<uInt>(chunk);
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof(buffer);
      rc = inflate(&z, Z_NO_FLUSH);
      at += chunk - z.avail_in;
      out.append(buffer, sizeof(buffer) - z.avail_out);
      if (out.size() > kMaxIdxBytes) {
        status = absl::InvalidArgumentError(
            absl::StrCat(name, ": inflates to more than ", kMaxIdxBytes, " bytes, the most read"));
        break;
      }
      if (rc == Z_BUF_ERROR && z.avail_out != 0) {  // no progress: input ended
        status = absl::DataLossError(absl::StrCat(name, ": truncated gzip member"));
        break;
      }
      if (rc == Z_BUF_ERROR) rc = Z_OK;  // output was full; go on
    }
    if (status.ok() && rc != Z_STREAM_END) {
      status = absl::DataLossError(
          absl::StrCat(name, ": ", z.msg != nullptr ? z.msg : "corrupt gzip data"));
    }
  }
  inflateEnd(&z);
  if (!status.ok()) return status;
  return out;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  std::string actual = path;
  if (access(actual.c_str(), F_OK) != 0) actual = path + ".gz";
  // A regular file only (lib/cache's reader does not wait on a FIFO), read
  // whole; a file that starts with gzip's magic is inflated.
  absl::StatusOr<std::string> raw = cache::ReadWholeFile(actual, kMaxIdxBytes);
  if (absl::IsNotFound(raw.status())) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, "[.gz]"));
  }
  if (!raw.ok()) return raw.status();
  std::string bytes;
  if (raw->size() >= 2 && static_cast<uint8_t>((*raw)[0]) == 0x1f &&
      static_cast<uint8_t>((*raw)[1]) == 0x8b) {
    absl::StatusOr<std::string> inflated = Gunzip(*raw, actual);
    if (!inflated.ok()) return inflated.status();
    bytes = std::move(*inflated);
  } else {
    bytes = std::move(*raw);
  }

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
