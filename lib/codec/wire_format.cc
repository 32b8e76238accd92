// Frame writing and validation. docs/wire_format.md is the grammar this file
// implements; the offsets below must match its table.
//
// Two rules hold throughout, because a frame may come from a hostile or
// broken peer:
//   * bytes are read with memcpy into a value and converted from little
//     endian, never through a cast of an unaligned pointer;
//   * every length is compared against what is left, never summed first:
//     three u64 section lengths can wrap around and look small.
#include "gradwire/lib/codec/wire_format.h"

#include <xxhash.h>

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace {

// Header field offsets (docs/wire_format.md, "Header").
constexpr size_t kMagicAt = 0;
constexpr size_t kVersionAt = 4;
constexpr size_t kCodecAt = 5;
constexpr size_t kValueTypeAt = 6;
constexpr size_t kIndexEncodingAt = 7;
constexpr size_t kQuantBitsAt = 8;
constexpr size_t kFlagsAt = 9;
constexpr size_t kReservedAt = 10;
constexpr size_t kBucketSizeAt = 12;
constexpr size_t kDenseLengthAt = 16;
constexpr size_t kElementCountAt = 24;
constexpr size_t kStepAt = 32;
constexpr size_t kSeedAt = 40;
constexpr size_t kIndexBytesAt = 48;
constexpr size_t kScaleBytesAt = 56;
constexpr size_t kValueBytesAt = 64;
static_assert(kValueBytesAt + 8 == kFrameHeaderBytes, "header table and size disagree");

constexpr size_t kMinFrameBytes = kFrameHeaderBytes + kFrameChecksumBytes;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint8_t kMaxQuantBits = 8;
constexpr int kMaxVarintBytes = 5;  // ceil(32 / 7)

constexpr bool kHostIsLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

template <typename T>
T ToOrFromLittle(T v) {
  if constexpr (kHostIsLittleEndian || sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(v);
  } else {
    return __builtin_bswap64(v);
  }
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return ToOrFromLittle(v);
}

template <typename T>
void Store(uint8_t* p, T v) {
  v = ToOrFromLittle(v);
  std::memcpy(p, &v, sizeof(T));
}

// The header as it sits on the wire, before any field is trusted; enum
// fields stay raw bytes until their range is checked, because converting an
// out-of-range byte to the enum would hide the bad value.
struct WireHeader {
  uint32_t magic;
  uint8_t version;
  uint8_t codec;
  uint8_t value_type;
  uint8_t index_encoding;
  uint8_t quant_bits;
  uint8_t flags;
  uint16_t reserved;
  uint32_t bucket_size;
  uint64_t dense_length;
  uint64_t element_count;
  uint64_t step;
  uint64_t seed;
  uint64_t index_bytes;
  uint64_t scale_bytes;
  uint64_t value_bytes;
};

WireHeader ReadWireHeader(const uint8_t* p) {
  WireHeader h;
  h.magic = Load<uint32_t>(p + kMagicAt);
  h.version = p[kVersionAt];
  h.codec = p[kCodecAt];
  h.value_type = p[kValueTypeAt];
  h.index_encoding = p[kIndexEncodingAt];
  h.quant_bits = p[kQuantBitsAt];
  h.flags = p[kFlagsAt];
  h.reserved = Load<uint16_t>(p + kReservedAt);
  h.bucket_size = Load<uint32_t>(p + kBucketSizeAt);
  h.dense_length = Load<uint64_t>(p + kDenseLengthAt);
  h.element_count = Load<uint64_t>(p + kElementCountAt);
  h.step = Load<uint64_t>(p + kStepAt);
  h.seed = Load<uint64_t>(p + kSeedAt);
  h.index_bytes = Load<uint64_t>(p + kIndexBytesAt);
  h.scale_bytes = Load<uint64_t>(p + kScaleBytesAt);
  h.value_bytes = Load<uint64_t>(p + kValueBytesAt);
  return h;
}

WireHeader ToWire(const FrameHeader& f) {
  WireHeader h;
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = static_cast<uint8_t>(f.codec);
  h.value_type = static_cast<uint8_t>(f.value_type);
  h.index_encoding = static_cast<uint8_t>(f.index_encoding);
  h.quant_bits = f.quant_bits;
  h.flags = f.flags;
  h.reserved = 0;
  h.bucket_size = f.bucket_size;
  h.dense_length = f.dense_length;
  h.element_count = f.element_count;
  h.step = f.step;
  h.seed = f.seed;
  h.index_bytes = f.index_bytes;
  h.scale_bytes = f.scale_bytes;
  h.value_bytes = f.value_bytes;
  return h;
}

// Only valid after CheckFields succeeded.
FrameHeader FromWire(const WireHeader& h) {
  FrameHeader f;
  f.codec = static_cast<CodecId>(h.codec);
  f.value_type = static_cast<ValueType>(h.value_type);
  f.index_encoding = static_cast<IndexEncoding>(h.index_encoding);
  f.quant_bits = h.quant_bits;
  f.flags = h.flags;
  f.bucket_size = h.bucket_size;
  f.dense_length = h.dense_length;
  f.element_count = h.element_count;
  f.step = h.step;
  f.seed = h.seed;
  f.index_bytes = h.index_bytes;
  f.scale_bytes = h.scale_bytes;
  f.value_bytes = h.value_bytes;
  return f;
}

void WriteWireHeader(const WireHeader& h, uint8_t* p) {
  Store<uint32_t>(p + kMagicAt, h.magic);
  p[kVersionAt] = h.version;
  p[kCodecAt] = h.codec;
  p[kValueTypeAt] = h.value_type;
  p[kIndexEncodingAt] = h.index_encoding;
  p[kQuantBitsAt] = h.quant_bits;
  p[kFlagsAt] = h.flags;
  Store<uint16_t>(p + kReservedAt, h.reserved);
  Store<uint32_t>(p + kBucketSizeAt, h.bucket_size);
  Store<uint64_t>(p + kDenseLengthAt, h.dense_length);
  Store<uint64_t>(p + kElementCountAt, h.element_count);
  Store<uint64_t>(p + kStepAt, h.step);
  Store<uint64_t>(p + kSeedAt, h.seed);
  Store<uint64_t>(p + kIndexBytesAt, h.index_bytes);
  Store<uint64_t>(p + kScaleBytesAt, h.scale_bytes);
  Store<uint64_t>(p + kValueBytesAt, h.value_bytes);
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("wire frame: ", what));
}

// Magic, version, enum ranges, quant_bits, reserved bits: the fields whose
// validity depends on nothing else. Order as documented for ParseFrame.
absl::Status CheckFields(const WireHeader& h) {
  if (h.magic != kFrameMagic) {
    return Invalid(absl::StrCat("bad magic 0x", absl::Hex(h.magic, absl::kZeroPad8),
                                " (expected 0x", absl::Hex(kFrameMagic, absl::kZeroPad8),
                                ", \"GWF1\"): not a gradwire frame"));
  }
  if (h.version != kFrameVersion) {
    return Invalid(absl::StrCat("unsupported version ", h.version, " (this build reads version ",
                                kFrameVersion, ")"));
  }
  if (h.codec > kMaxCodecId) {
    return Invalid(absl::StrCat("unknown codec id ", h.codec, " (known: 0..", kMaxCodecId, ")"));
  }
  if (h.value_type > kMaxValueType) {
    return Invalid(
        absl::StrCat("unknown value_type ", h.value_type, " (known: 0..", kMaxValueType, ")"));
  }
  if (h.index_encoding > kMaxIndexEncoding) {
    return Invalid(absl::StrCat("unknown index_encoding ", h.index_encoding, " (known: 0..",
                                kMaxIndexEncoding, ")"));
  }
  const bool packed = h.value_type == static_cast<uint8_t>(ValueType::kPacked);
  if (packed && (h.quant_bits < 1 || h.quant_bits > kMaxQuantBits)) {
    return Invalid(absl::StrCat("quant_bits ", h.quant_bits,
                                " out of range 1..8 for packed values"));
  }
  if (!packed && h.quant_bits != 0) {
    return Invalid(absl::StrCat("quant_bits ", h.quant_bits,
                                " must be 0 unless value_type is packed (3), got value_type ",
                                h.value_type));
  }
  if (h.reserved != 0) {
    return Invalid(absl::StrCat("reserved field is 0x", absl::Hex(h.reserved),
                                ", must be 0 (written by a newer sender?)"));
  }
  if ((h.flags & ~kKnownFlags) != 0) {
    return Invalid(absl::StrCat("unknown flag bits 0x", absl::Hex(h.flags & ~kKnownFlags),
                                " in flags 0x", absl::Hex(h.flags), " (known: 0x",
                                absl::Hex(kKnownFlags), ")"));
  }
  return absl::OkStatus();
}

// Section lengths against the `body` bytes between header and checksum.
// Compares each length with what is left instead of adding them, so
// lengths near 2^64 cannot wrap into a plausible sum.
absl::Status CheckSections(const WireHeader& h, uint64_t body, uint64_t frame_bytes) {
  if (h.index_encoding == static_cast<uint8_t>(IndexEncoding::kNone) && h.index_bytes != 0) {
    return Invalid(
        absl::StrCat("index_bytes ", h.index_bytes, " with index_encoding none (must be 0)"));
  }
  if (h.index_bytes > body) {
    return Invalid(absl::StrCat("index_bytes ", h.index_bytes, " exceeds the ", body,
                                " bytes between header and checksum (frame length ",
                                frame_bytes, ")"));
  }
  uint64_t left = body - h.index_bytes;
  if (h.scale_bytes > left) {
    return Invalid(absl::StrCat("scale_bytes ", h.scale_bytes, " exceeds the ", left,
                                " bytes left after ", h.index_bytes,
                                " index bytes (frame length ", frame_bytes, ")"));
  }
  left -= h.scale_bytes;
  if (h.value_bytes > left) {
    return Invalid(absl::StrCat("value_bytes ", h.value_bytes, " exceeds the ", left,
                                " bytes left after indices and scales (frame length ",
                                frame_bytes, ")"));
  }
  if (h.value_bytes < left) {
    return Invalid(absl::StrCat("frame length ", frame_bytes, " has ", left - h.value_bytes,
                                " trailing bytes beyond its sections (index_bytes ",
                                h.index_bytes, ", scale_bytes ", h.scale_bytes,
                                ", value_bytes ", h.value_bytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckElementCount(const WireHeader& h) {
  if (h.element_count > h.dense_length) {
    return Invalid(absl::StrCat("element_count ", h.element_count, " exceeds dense_length ",
                                h.dense_length));
  }
  return absl::OkStatus();
}

// Total frame bytes, or false if the sum does not fit in a u64.
bool TotalBytes(const WireHeader& h, uint64_t* total) {
  uint64_t t = kMinFrameBytes;
  return !__builtin_add_overflow(t, h.index_bytes, &t) &&
         !__builtin_add_overflow(t, h.scale_bytes, &t) &&
         !__builtin_add_overflow(t, h.value_bytes, &t) && (*total = t, true);
}

// What a sender must get right before writing or sealing: the field rules
// plus lengths that add up. Receivers' caps are not known here.
absl::Status CheckOutgoing(const WireHeader& h, size_t buffer_bytes, uint64_t* total) {
  if (absl::Status s = CheckFields(h); !s.ok()) return s;
  if (h.index_encoding == static_cast<uint8_t>(IndexEncoding::kNone) && h.index_bytes != 0) {
    return Invalid(
        absl::StrCat("index_bytes ", h.index_bytes, " with index_encoding none (must be 0)"));
  }
  if (absl::Status s = CheckElementCount(h); !s.ok()) return s;
  if (!TotalBytes(h, total)) {
    return Invalid(absl::StrCat("section lengths overflow a 64-bit frame length (index_bytes ",
                                h.index_bytes, ", scale_bytes ", h.scale_bytes,
                                ", value_bytes ", h.value_bytes, ")"));
  }
  if (*total > buffer_bytes) {
    return Invalid(absl::StrCat("output buffer of ", buffer_bytes, " bytes is smaller than the ",
                                *total, "-byte frame"));
  }
  return absl::OkStatus();
}

uint64_t Checksum(const uint8_t* data, size_t n) { return XXH3_64bits(data, n); }

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kU64Max : r;
}

// Writes v as LEB128 at out[*pos]; false if it does not fit.
bool PutVarint(uint32_t v, absl::Span<uint8_t> out, size_t* pos) {
  do {
    if (*pos >= out.size()) return false;
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out[(*pos)++] = byte;
  } while (v != 0);
  return true;
}

// Reads one canonical LEB128 value < 2^32 at in[*pos]. Rejects running off
// the end, a sixth byte, bits above 2^32, and overlong forms (a final zero
// byte after the first): a canonical encoding makes a frame's bytes a
// function of its contents, which the fuzzer's round trip relies on.
absl::Status GetVarint(absl::Span<const uint8_t> in, size_t* pos, size_t ordinal,
                       uint32_t* value) {
  const size_t start = *pos;
  uint64_t v = 0;
  for (int i = 0;; ++i) {
    if (*pos >= in.size()) {
      return Invalid(absl::StrCat("delta-varint indices: varint #", ordinal, " at byte ", start,
                                  " runs past the end of the ", in.size(), "-byte section"));
    }
    const uint8_t byte = in[(*pos)++];
    v |= uint64_t{byte & 0x7fu} << (7 * i);
    if (i == kMaxVarintBytes - 1 && (byte & 0xf0) != 0) {
      // Fifth byte: only 4 payload bits remain below 2^32, and no
      // continuation is allowed.
      return Invalid(absl::StrCat("delta-varint indices: varint #", ordinal, " at byte ", start,
                                  " exceeds 32 bits (fifth byte 0x", absl::Hex(byte), ")"));
    }
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) {
        return Invalid(absl::StrCat("delta-varint indices: varint #", ordinal, " at byte ",
                                    start, " is overlong (", i + 1,
                                    " bytes ending in 0x00; encodings must be minimal)"));
      }
      break;
    }
  }
  *value = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

}  // namespace

uint64_t FrameBytes(const FrameHeader& header) {
  uint64_t total;
  // Saturates so that a header with absurd lengths compares as "too big"
  // against any buffer instead of wrapping to a small number.
  return TotalBytes(ToWire(header), &total) ? total : kU64Max;
}

absl::StatusOr<MutableFrameSections> StartFrame(const FrameHeader& header,
                                                absl::Span<uint8_t> out) {
  const WireHeader h = ToWire(header);
  uint64_t total;
  if (absl::Status s = CheckOutgoing(h, out.size(), &total); !s.ok()) return s;
  WriteWireHeader(h, out.data());
  uint8_t* p = out.data() + kFrameHeaderBytes;
  MutableFrameSections sections;
  sections.indices = absl::MakeSpan(p, h.index_bytes);
  p += h.index_bytes;
  sections.scales = absl::MakeSpan(p, h.scale_bytes);
  p += h.scale_bytes;
  sections.values = absl::MakeSpan(p, h.value_bytes);
  return sections;
}

absl::StatusOr<size_t> SealFrame(absl::Span<uint8_t> out) {
  if (out.size() < kFrameHeaderBytes) {
    return Invalid(absl::StrCat("cannot seal a ", out.size(), "-byte buffer: shorter than the ",
                                kFrameHeaderBytes, "-byte header"));
  }
  // Re-validate the header in the buffer: it is the one the receiver will
  // see, and a caller may have written over it since StartFrame.
  const WireHeader h = ReadWireHeader(out.data());
  uint64_t total;
  if (absl::Status s = CheckOutgoing(h, out.size(), &total); !s.ok()) return s;
  const size_t covered = total - kFrameChecksumBytes;
  Store<uint64_t>(out.data() + covered, Checksum(out.data(), covered));
  return static_cast<size_t>(total);
}

absl::StatusOr<ParsedFrame> ParseFrame(absl::Span<const uint8_t> frame,
                                       const FrameLimits& limits) {
  if (frame.size() < kMinFrameBytes) {
    return Invalid(absl::StrCat("truncated: ", frame.size(), " bytes, shorter than the ",
                                kMinFrameBytes, "-byte minimum (", kFrameHeaderBytes,
                                "-byte header + ", kFrameChecksumBytes, "-byte checksum)"));
  }
  const WireHeader h = ReadWireHeader(frame.data());
  if (absl::Status s = CheckFields(h); !s.ok()) return s;

  // Caps come before anything is sized from the header's lengths.
  if (h.dense_length > limits.max_dense_length) {
    return Invalid(absl::StrCat("dense_length ", h.dense_length,
                                " exceeds the receiver's max_dense_length ",
                                limits.max_dense_length));
  }
  if (frame.size() > limits.max_frame_bytes) {
    return Invalid(absl::StrCat("frame length ", frame.size(),
                                " exceeds the receiver's max_frame_bytes ",
                                limits.max_frame_bytes));
  }

  const uint64_t body = frame.size() - kMinFrameBytes;
  if (absl::Status s = CheckSections(h, body, frame.size()); !s.ok()) return s;
  if (absl::Status s = CheckElementCount(h); !s.ok()) return s;

  const size_t covered = frame.size() - kFrameChecksumBytes;
  const uint64_t stored = Load<uint64_t>(frame.data() + covered);
  const uint64_t computed = Checksum(frame.data(), covered);
  if (stored != computed) {
    return absl::DataLossError(absl::StrCat(
        "wire frame: checksum mismatch (stored 0x", absl::Hex(stored, absl::kZeroPad16),
        ", computed 0x", absl::Hex(computed, absl::kZeroPad16), " over ", covered,
        " bytes): frame corrupted in transit"));
  }

  ParsedFrame parsed;
  parsed.header = FromWire(h);
  const uint8_t* p = frame.data() + kFrameHeaderBytes;
  parsed.sections.indices = absl::MakeConstSpan(p, h.index_bytes);
  p += h.index_bytes;
  parsed.sections.scales = absl::MakeConstSpan(p, h.scale_bytes);
  p += h.scale_bytes;
  parsed.sections.values = absl::MakeConstSpan(p, h.value_bytes);
  return parsed;
}

uint64_t MaxIndexBytes(IndexEncoding encoding, uint64_t count) {
  switch (encoding) {
    case IndexEncoding::kNone:
      return 0;
    case IndexEncoding::kRawU32:
      return SaturatingMul(count, 4);
    case IndexEncoding::kDeltaVarint:
      return SaturatingMul(count, kMaxVarintBytes);
  }
  return 0;
}

absl::StatusOr<size_t> EncodeIndices(IndexEncoding encoding, absl::Span<const uint32_t> indices,
                                     absl::Span<uint8_t> out) {
  for (size_t i = 1; i < indices.size(); ++i) {
    if (indices[i] <= indices[i - 1]) {
      return Invalid(absl::StrCat("cannot encode indices: #", i, " (", indices[i],
                                  ") does not exceed #", i - 1, " (", indices[i - 1],
                                  "); indices must be strictly increasing"));
    }
  }
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!indices.empty()) {
        return Invalid(absl::StrCat("cannot encode ", indices.size(),
                                    " indices with index_encoding none"));
      }
      return size_t{0};
    case IndexEncoding::kRawU32: {
      if (out.size() / 4 < indices.size()) {
        return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                    indices.size(), " raw u32 indices"));
      }
      for (size_t i = 0; i < indices.size(); ++i) Store<uint32_t>(out.data() + 4 * i, indices[i]);
      return indices.size() * 4;
    }
    case IndexEncoding::kDeltaVarint: {
      size_t pos = 0;
      for (size_t i = 0; i < indices.size(); ++i) {
        const uint32_t v = i == 0 ? indices[0] : indices[i] - indices[i - 1] - 1;
        if (!PutVarint(v, out, &pos)) {
          return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                      indices.size(), " delta-varint indices (full at #", i,
                                      "); size it with MaxIndexBytes"));
        }
      }
      return pos;
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", static_cast<int>(encoding)));
}

absl::Status DecodeIndices(IndexEncoding encoding, absl::Span<const uint8_t> in,
                           uint64_t dense_length, absl::Span<uint32_t> out) {
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!in.empty() || !out.empty()) {
        return Invalid(absl::StrCat("index_encoding none carries no indices, but got ",
                                    in.size(), " bytes for ", out.size(), " indices"));
      }
      return absl::OkStatus();
    case IndexEncoding::kRawU32: {
      if (in.size() % 4 != 0 || in.size() / 4 != out.size()) {
        return Invalid(absl::StrCat("raw u32 indices: ", in.size(), " bytes for ", out.size(),
                                    " indices (need exactly ", SaturatingMul(out.size(), 4),
                                    ")"));
      }
      for (size_t i = 0; i < out.size(); ++i) {
        const uint32_t v = Load<uint32_t>(in.data() + 4 * i);
        if (v >= dense_length) {
          return Invalid(absl::StrCat("raw u32 indices: index #", i, " = ", v,
                                      " is not below dense_length ", dense_length));
        }
        if (i > 0 && v <= out[i - 1]) {
          return Invalid(absl::StrCat("raw u32 indices: index #", i, " = ", v,
                                      " does not exceed index #", i - 1, " = ", out[i - 1],
                                      " (must be strictly increasing)"));
        }
        out[i] = v;
      }
      return absl::OkStatus();
    }
    case IndexEncoding::kDeltaVarint: {
      // Each varint takes at least one byte: refuse early rather than decode
      // a section that cannot possibly hold out.size() indices.
      if (out.size() > in.size()) {
        return Invalid(absl::StrCat("delta-varint indices: ", in.size(),
                                    " bytes cannot hold ", out.size(), " indices"));
      }
      size_t pos = 0;
      uint64_t prev = 0;
      const uint8_t* bytes = in.data();
      for (size_t i = 0; i < out.size(); ++i) {
        uint32_t raw;
        // Fast path for the common one- and two-byte gaps (below 2^14);
        // anything else, including every malformed case (a 0x00 second
        // byte is overlong), goes through GetVarint's full checks.
        if (pos < in.size() && bytes[pos] < 0x80) {
          raw = bytes[pos++];
        } else if (pos + 1 < in.size() && bytes[pos + 1] < 0x80 && bytes[pos + 1] != 0) {
          raw = (bytes[pos] & 0x7fu) | uint32_t{bytes[pos + 1]} << 7;
          pos += 2;
        } else if (absl::Status s = GetVarint(in, &pos, i, &raw); !s.ok()) {
          return s;
        }
        // Gaps are stored minus one, so strictly increasing holds by
        // construction; the u64 sum cannot wrap (< 2^33).
        const uint64_t v = i == 0 ? raw : prev + 1 + raw;
        if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) {
          return Invalid(absl::StrCat("delta-varint indices: index #", i, " = ", v,
                                      " is not below dense_length ", dense_length,
                                      v > std::numeric_limits<uint32_t>::max()
                                          ? " (and exceeds u32)"
                                          : ""));
        }
        out[i] = static_cast<uint32_t>(v);
        prev = v;
      }
      if (pos != in.size()) {
        return Invalid(absl::StrCat("delta-varint indices: ", in.size() - pos,
                                    " trailing bytes after ", out.size(), " indices (section of ",
                                    in.size(), " bytes)"));
      }
      return absl::OkStatus();
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", static_cast<int>(encoding)));
}

}  // namespace gradwire
