#include "gradwire/lib/comm/region_frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"

namespace gradwire {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("region frame: ", what));
}

absl::Status Mismatch(const char* field, uint64_t got, uint64_t want) {
  return Invalid(absl::StrCat(field, " is ", got, ", expected ", want));
}

// Exact bytes of `indices` (strictly increasing) in a sparse layout.
uint64_t SparseIndexBytes(RegionLayout layout, const uint32_t* indices, uint64_t count) {
  if (layout == RegionLayout::kRawU32) return 4 * count;
  if (layout != RegionLayout::kDeltaVarint || count == 0) return 0;
  uint64_t bytes = Varint32Length(indices[0]);
  for (uint64_t j = 1; j < count; ++j) bytes += Varint32Length(indices[j] - indices[j - 1] - 1);
  return bytes;
}

void WriteHeader(const RegionFrameHeader& h, uint8_t* out) {
  EncodeFixed32(out, kRegionFrameMagic);
  out[4] = kRegionFrameVersion;
  out[5] = static_cast<uint8_t>(h.kind);
  out[6] = static_cast<uint8_t>(h.value_type);
  out[7] = static_cast<uint8_t>(h.layout);
  EncodeFixed32(out + 8, h.region);
  EncodeFixed32(out + 12, h.status);
  EncodeFixed32(out + 16, static_cast<uint32_t>(h.begin));
  EncodeFixed32(out + 20, static_cast<uint32_t>(h.length));
  EncodeFixed32(out + 24, static_cast<uint32_t>(h.count));
  EncodeFixed32(out + 28, 0);  // reserved
  EncodeFixed64(out + 32, h.index_bytes);
}

}  // namespace

void EvenRegions(uint64_t n, int p, std::vector<uint64_t>* bounds) {
  bounds->resize(p + 1);
  for (int j = 0; j <= p; ++j) (*bounds)[j] = j * n / p;
}

uint64_t ValueBytes(ValueType type) { return type == ValueType::kFp32 ? 4 : 2; }

uint64_t MaxRegionFrameBytes(RegionLayout sparse, ValueType type, uint64_t length,
                             uint64_t max_count) {
  const uint64_t width = ValueBytes(type);
  const uint64_t dense = length * width;
  if (sparse == RegionLayout::kImplied) return kRegionHeaderBytes + max_count * width;
  const uint64_t count = std::min(max_count, length);
  const uint64_t sparse_bytes =
      MaxIndexBytes(static_cast<IndexEncoding>(sparse), count) + count * width;
  return kRegionHeaderBytes + std::min(sparse_bytes, dense);
}

absl::StatusOr<size_t> WriteRegionFrame(const RegionFrameHeader& header, RegionLayout sparse,
                                        const RegionEntries& entries, absl::Span<uint8_t> out) {
  RegionFrameHeader h = header;
  if (h.begin + h.length > kMaxRegionEnd) {
    return Invalid(absl::StrCat("region [", h.begin, ", ", h.begin + h.length,
                                ") does not fit the u32 fields"));
  }
  const uint64_t width = ValueBytes(h.value_type);
  const uint64_t dense_bytes = h.length * width;
  uint64_t index_bytes = 0;
  bool dense = false;
  if (sparse == RegionLayout::kImplied) {
    h.layout = RegionLayout::kImplied;
  } else {
    index_bytes = SparseIndexBytes(sparse, entries.indices, entries.count);
    dense = dense_bytes < index_bytes + entries.count * width;
    h.layout = dense ? RegionLayout::kDense : sparse;
  }
  h.count = dense ? h.length : entries.count;
  h.index_bytes = dense ? 0 : index_bytes;
  h.value_bytes = h.count * width;
  const uint64_t total = kRegionHeaderBytes + h.index_bytes + h.value_bytes;
  if (out.size() < total) {
    return Invalid(absl::StrCat("output of ", out.size(), " bytes is too small for ", total));
  }
  WriteHeader(h, out.data());
  uint8_t* body = out.data() + kRegionHeaderBytes;
  if (dense) {
    std::memset(body, 0, dense_bytes);
    for (uint64_t j = 0; j < entries.count; ++j) {
      std::memcpy(body + entries.indices[j] * width, entries.values + j * width, width);
    }
    return total;
  }
  if (h.layout != RegionLayout::kImplied) {
    absl::StatusOr<size_t> written = EncodeIndices(
        static_cast<IndexEncoding>(h.layout), absl::MakeConstSpan(entries.indices, entries.count),
        absl::MakeSpan(body, h.index_bytes));
    if (!written.ok()) return written.status();
  }
  if (h.value_bytes > 0) std::memcpy(body + h.index_bytes, entries.values, h.value_bytes);
  return total;
}

absl::StatusOr<size_t> WriteRegionFailure(uint32_t region, uint64_t begin, uint64_t length,
                                          uint32_t code, absl::Span<uint8_t> out) {
  if (out.size() < kRegionHeaderBytes) return Invalid("output too small for a failure notice");
  RegionFrameHeader h;
  h.kind = RegionFrameKind::kFailure;
  h.layout = RegionLayout::kImplied;
  h.region = region;
  h.status = code;
  h.begin = begin;
  h.length = length;
  WriteHeader(h, out.data());
  return kRegionHeaderBytes;
}

absl::StatusOr<RegionFrameView> ParseRegionFrame(absl::Span<const uint8_t> frame,
                                                 const RegionExpectation& want,
                                                 std::vector<uint32_t>* indices) {
  indices->clear();
  if (frame.size() < kRegionHeaderBytes) {
    return Invalid(absl::StrCat(frame.size(), " bytes, shorter than the ", kRegionHeaderBytes,
                                "-byte header"));
  }
  const uint8_t* p = frame.data();
  if (DecodeFixed32(p) != kRegionFrameMagic) return Invalid("bad magic (not a region frame)");
  if (p[4] != kRegionFrameVersion) return Mismatch("version", p[4], kRegionFrameVersion);
  RegionFrameView view;
  RegionFrameHeader& h = view.header;
  const uint8_t kind = p[5], type = p[6], layout = p[7];
  h.region = DecodeFixed32(p + 8);
  h.status = DecodeFixed32(p + 12);
  h.begin = DecodeFixed32(p + 16);
  h.length = DecodeFixed32(p + 20);
  h.count = DecodeFixed32(p + 24);
  const uint32_t reserved = DecodeFixed32(p + 28);
  h.index_bytes = DecodeFixed64(p + 32);
  const bool failure = kind == static_cast<uint8_t>(RegionFrameKind::kFailure);
  if (kind != static_cast<uint8_t>(want.kind) && !(failure && want.failure_allowed)) {
    return Mismatch("kind", kind, static_cast<uint8_t>(want.kind));
  }
  h.kind = static_cast<RegionFrameKind>(kind);
  if (h.region != want.region) return Mismatch("region", h.region, want.region);
  if (h.begin != want.begin) return Mismatch("region begin", h.begin, want.begin);
  if (h.length != want.length) return Mismatch("region length", h.length, want.length);
  // As WriteRegionFrame requires: regions end below 2^32.
  if (h.begin + h.length > kMaxRegionEnd) {
    return Invalid(absl::StrCat("region [", h.begin, ", ", h.begin + h.length,
                                ") does not fit the u32 fields"));
  }
  if (failure) {
    if (h.status == 0 || h.count != 0 || h.index_bytes != 0 || reserved != 0 ||
        frame.size() != kRegionHeaderBytes) {
      return Invalid("malformed failure notice");
    }
    return view;
  }
  if (h.status != 0) return Mismatch("status", h.status, 0);
  if (reserved != 0) return Mismatch("reserved field", reserved, 0);
  if (type != static_cast<uint8_t>(want.value_type)) {
    return Mismatch("value type", type, static_cast<uint8_t>(want.value_type));
  }
  h.value_type = want.value_type;
  if (layout != static_cast<uint8_t>(RegionLayout::kDense) &&
      layout != static_cast<uint8_t>(want.sparse)) {
    return Mismatch("layout", layout, static_cast<uint8_t>(want.sparse));
  }
  h.layout = static_cast<RegionLayout>(layout);
  const uint64_t width = ValueBytes(h.value_type);
  switch (h.layout) {
    case RegionLayout::kDense:
      if (h.count != h.length) return Mismatch("count of a dense frame", h.count, h.length);
      if (h.index_bytes != 0) return Mismatch("index bytes of a dense frame", h.index_bytes, 0);
      break;
    case RegionLayout::kImplied:
      if (h.count != want.implied_count) return Mismatch("count", h.count, want.implied_count);
      if (h.index_bytes != 0) return Mismatch("index bytes", h.index_bytes, 0);
      break;
    default:
      if (h.count > std::min(want.max_count, h.length)) {
        return Invalid(absl::StrCat("count ", h.count, " exceeds the most this region can hold, ",
                                    std::min(want.max_count, h.length)));
      }
      if (h.index_bytes > MaxIndexBytes(static_cast<IndexEncoding>(h.layout), h.count)) {
        return Invalid(absl::StrCat(h.index_bytes, " index bytes for ", h.count, " indices"));
      }
      break;
  }
  h.value_bytes = h.count * width;
  // Every field is bounded now (count by the region length, which the
  // receiver chose), so the sum cannot overflow.
  const uint64_t total = kRegionHeaderBytes + h.index_bytes + h.value_bytes;
  if (frame.size() != total) return Mismatch("frame length", frame.size(), total);
  const uint8_t* body = p + kRegionHeaderBytes;
  if (h.layout == RegionLayout::kRawU32 || h.layout == RegionLayout::kDeltaVarint) {
    indices->resize(h.count);
    absl::Status s =
        DecodeIndices(static_cast<IndexEncoding>(h.layout),
                      absl::MakeConstSpan(body, h.index_bytes), h.length, absl::MakeSpan(*indices));
    if (!s.ok()) return Invalid(std::string(s.message()));
  }
  view.values = absl::MakeConstSpan(body + h.index_bytes, h.value_bytes);
  return view;
}

}  // namespace gradwire
