// Frame writing and validation. docs/wire_format.md is the grammar this file
// implements; the offsets below must match its table.
//
// Two rules hold throughout, because a frame may come from a hostile or
// broken peer:
//   * bytes are decoded a field at a time with base/coding.h, never through
//     a cast of an unaligned pointer;
//   * every length is compared against what is left, never summed first:
//     three u64 section lengths can wrap around and look small.
#include "gradwire/lib/codec/wire_format.h"

#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"

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

constexpr size_t kMinFrameBytes = kFrameHeaderBytes + kFrameChecksumBytes;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint8_t kMaxQuantBits = 8;

// The header as it sits on the wire: a FrameHeader plus the three fields a
// writer fixes. Enum fields hold whatever byte arrived (an enum over
// uint8_t holds any value) until CheckFields has checked their range.
struct WireHeader {
  uint32_t magic = kFrameMagic;
  uint8_t version = kFrameVersion;
  uint16_t reserved = 0;
  FrameHeader f;
};

// Every header field with its offset, in wire order: the one statement of
// the layout, through which the header is read, written and (below, at
// compile time) checked against kFrameHeaderBytes.
template <typename Header, typename Fn>
constexpr void ForEachField(Header& h, Fn&& fn) {
  fn(kMagicAt, h.magic);
  fn(kVersionAt, h.version);
  fn(kCodecAt, h.f.codec);
  fn(kValueTypeAt, h.f.value_type);
  fn(kIndexEncodingAt, h.f.index_encoding);
  fn(kQuantBitsAt, h.f.quant_bits);
  fn(kFlagsAt, h.f.flags);
  fn(kReservedAt, h.reserved);
  fn(kBucketSizeAt, h.f.bucket_size);
  fn(kDenseLengthAt, h.f.dense_length);
  fn(kElementCountAt, h.f.element_count);
  fn(kStepAt, h.f.step);
  fn(kSeedAt, h.f.seed);
  fn(kIndexBytesAt, h.f.index_bytes);
  fn(kScaleBytesAt, h.f.scale_bytes);
  fn(kValueBytesAt, h.f.value_bytes);
}

// The fields, each as wide as its type, tile the header with no gap or
// overlap: an offset that disagrees with a field's width fails to compile.
constexpr bool FieldsTileTheHeader() {
  WireHeader h;
  size_t next = 0;
  bool tiled = true;
  ForEachField(h, [&](size_t at, const auto& field) {
    tiled = tiled && at == next;
    next = at + sizeof(field);
  });
  return tiled && next == kFrameHeaderBytes;
}
static_assert(FieldsTileTheHeader(), "header fields and docs/wire_format.md's table disagree");

WireHeader ReadHeader(const uint8_t* p) {
  WireHeader h;
  ForEachField(h, [p](size_t at, auto& field) {
    field = DecodeFixed<std::remove_reference_t<decltype(field)>>(p + at);
  });
  return h;
}

void WriteHeader(const WireHeader& h, uint8_t* p) {
  ForEachField(h, [p](size_t at, const auto& field) { EncodeFixed(p + at, field); });
}

template <typename Enum>
uint8_t Raw(Enum e) {
  return static_cast<uint8_t>(e);
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("wire frame: ", what));
}

// Magic, version, enum ranges, quant_bits, reserved bits: the fields whose
// validity depends on nothing else. Order as documented for ParseFrame.
absl::Status CheckFields(const WireHeader& h) {
  const FrameHeader& f = h.f;
  if (h.magic != kFrameMagic) {
    return Invalid(absl::StrCat("bad magic 0x", absl::Hex(h.magic, absl::kZeroPad8),
                                " (expected 0x", absl::Hex(kFrameMagic, absl::kZeroPad8),
                                ", \"GWF1\"): not a gradwire frame"));
  }
  if (h.version < kFrameVersion || h.version > kMaxFrameVersion) {
    return Invalid(absl::StrCat("unsupported version ", h.version, " (this build reads versions ",
                                kFrameVersion, "..", kMaxFrameVersion, ")"));
  }
  if (Raw(f.codec) > kMaxCodecId) {
    return Invalid(
        absl::StrCat("unknown codec id ", Raw(f.codec), " (known: 0..", kMaxCodecId, ")"));
  }
  if (Raw(f.value_type) > kMaxValueType) {
    return Invalid(
        absl::StrCat("unknown value_type ", Raw(f.value_type), " (known: 0..", kMaxValueType, ")"));
  }
  if (Raw(f.index_encoding) > kMaxIndexEncoding) {
    return Invalid(absl::StrCat("unknown index_encoding ", Raw(f.index_encoding), " (known: 0..",
                                kMaxIndexEncoding, ")"));
  }
  if (h.version != FrameVersionFor(f.codec)) {
    if (f.codec == CodecId::kRandomK) {
      return Invalid(absl::StrCat(
          "random-k frame of version ", h.version, ": this build's random-k frames are version ",
          kRandomKFrameVersion,
          " (indices from the 32-bit element hash); the sender derives its indices from another "
          "hash, so they cannot be re-derived here. Run one gradwire build on every rank"));
    }
    return Invalid(absl::StrCat("unsupported version ", h.version, " for codec id ", Raw(f.codec),
                                " (this build reads version ", FrameVersionFor(f.codec),
                                " for it)"));
  }
  const bool packed = f.value_type == ValueType::kPacked;
  if (packed && (f.quant_bits < 1 || f.quant_bits > kMaxQuantBits)) {
    return Invalid(
        absl::StrCat("quant_bits ", f.quant_bits, " out of range 1..8 for packed values"));
  }
  if (!packed && f.quant_bits != 0) {
    return Invalid(absl::StrCat("quant_bits ", f.quant_bits,
                                " must be 0 unless value_type is packed (3), got value_type ",
                                Raw(f.value_type)));
  }
  if (h.reserved != 0) {
    return Invalid(absl::StrCat("reserved field is 0x", absl::Hex(h.reserved),
                                ", must be 0 (written by a newer sender?)"));
  }
  if ((f.flags & ~kKnownFlags) != 0) {
    return Invalid(absl::StrCat("unknown flag bits 0x", absl::Hex(f.flags & ~kKnownFlags),
                                " in flags 0x", absl::Hex(f.flags), " (known: 0x",
                                absl::Hex(kKnownFlags), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckNoIndexBytes(const FrameHeader& f) {
  if (f.index_encoding == IndexEncoding::kNone && f.index_bytes != 0) {
    return Invalid(
        absl::StrCat("index_bytes ", f.index_bytes, " with index_encoding none (must be 0)"));
  }
  return absl::OkStatus();
}

// Section lengths against the `body` bytes between header and checksum.
// Compares each length with what is left instead of adding them, so
// lengths near 2^64 cannot wrap into a plausible sum.
absl::Status CheckSections(const FrameHeader& f, uint64_t body, uint64_t frame_bytes) {
  if (absl::Status s = CheckNoIndexBytes(f); !s.ok()) return s;
  if (f.index_bytes > body) {
    return Invalid(absl::StrCat("index_bytes ", f.index_bytes, " exceeds the ", body,
                                " bytes between header and checksum (frame length ", frame_bytes,
                                ")"));
  }
  uint64_t left = body - f.index_bytes;
  if (f.scale_bytes > left) {
    return Invalid(absl::StrCat("scale_bytes ", f.scale_bytes, " exceeds the ", left,
                                " bytes left after ", f.index_bytes, " index bytes (frame length ",
                                frame_bytes, ")"));
  }
  left -= f.scale_bytes;
  if (f.value_bytes > left) {
    return Invalid(absl::StrCat("value_bytes ", f.value_bytes, " exceeds the ", left,
                                " bytes left after indices and scales (frame length ", frame_bytes,
                                ")"));
  }
  if (f.value_bytes < left) {
    return Invalid(absl::StrCat("frame length ", frame_bytes, " has ", left - f.value_bytes,
                                " trailing bytes beyond its sections (index_bytes ", f.index_bytes,
                                ", scale_bytes ", f.scale_bytes, ", value_bytes ", f.value_bytes,
                                ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckElementCount(const FrameHeader& f) {
  if (f.element_count > f.dense_length) {
    return Invalid(
        absl::StrCat("element_count ", f.element_count, " exceeds dense_length ", f.dense_length));
  }
  return absl::OkStatus();
}

// Total frame bytes, or false if the sum does not fit in a u64.
bool TotalBytes(const FrameHeader& f, uint64_t* total) {
  uint64_t t = kMinFrameBytes;
  return !__builtin_add_overflow(t, f.index_bytes, &t) &&
         !__builtin_add_overflow(t, f.scale_bytes, &t) &&
         !__builtin_add_overflow(t, f.value_bytes, &t) && (*total = t, true);
}

// What a sender must get right before writing or sealing: the field rules
// plus lengths that add up. Receivers' caps are not known here.
absl::Status CheckOutgoing(const WireHeader& h, size_t buffer_bytes, uint64_t* total) {
  const FrameHeader& f = h.f;
  if (absl::Status s = CheckFields(h); !s.ok()) return s;
  if (absl::Status s = CheckNoIndexBytes(f); !s.ok()) return s;
  if (absl::Status s = CheckElementCount(f); !s.ok()) return s;
  if (!TotalBytes(f, total)) {
    return Invalid(absl::StrCat("section lengths overflow a 64-bit frame length (index_bytes ",
                                f.index_bytes, ", scale_bytes ", f.scale_bytes, ", value_bytes ",
                                f.value_bytes, ")"));
  }
  if (*total > buffer_bytes) {
    return Invalid(absl::StrCat("output buffer of ", buffer_bytes, " bytes is smaller than the ",
                                *total, "-byte frame"));
  }
  return absl::OkStatus();
}

template <typename Bytes>
FrameSectionsT<Bytes> SectionsBehind(Bytes* header, const FrameHeader& f) {
  Bytes* p = header + kFrameHeaderBytes;
  FrameSectionsT<Bytes> sections;
  sections.indices = absl::MakeSpan(p, f.index_bytes);
  p += f.index_bytes;
  sections.scales = absl::MakeSpan(p, f.scale_bytes);
  p += f.scale_bytes;
  sections.values = absl::MakeSpan(p, f.value_bytes);
  return sections;
}

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kU64Max : r;
}

// The error for the malformed varint #ordinal at in[pos] (the fast decoder
// only says "no"; base's DecodeVarint32 says why).
absl::Status VarintError(absl::Span<const uint8_t> in, size_t pos, size_t ordinal) {
  uint32_t ignored = 0;
  absl::Status s =
      DecodeVarint32(in, &pos, &ignored, absl::StrCat("delta-varint indices: varint #", ordinal));
  if (s.ok()) return absl::InternalError("wire frame: varint decoders disagree");
  return Invalid(s.message());
}

// OK if indices[from - 1 ..] is strictly increasing (from >= 1), else
// the error that names the first pair that is not.
absl::Status CheckIncreasing(absl::Span<const uint32_t> indices, size_t from) {
  for (size_t i = from; i < indices.size(); ++i) {
    if (indices[i] <= indices[i - 1]) {
      return Invalid(absl::StrCat("cannot encode indices: #", i, " (", indices[i],
                                  ") does not exceed #", i - 1, " (", indices[i - 1],
                                  "); indices must be strictly increasing"));
    }
  }
  return absl::OkStatus();
}

// Dense selections (top-k at 10 %) have mostly one-byte gaps: when the
// next eight bytes are all one-byte varints, indices out[i, i + 8) (i > 0)
// follow from *prev by eight adds, with one range check for the last
// (the largest). Returns false, having moved nothing (out[i, i + 8) may
// hold junk), when they are not, when fewer than eight indices or bytes
// are left, or when the last is out of range: the caller's varint loop
// then decodes them one by one and names the bad one.
bool DecodeEightOneByteGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                            uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 8 || limit - *p < 8) return false;
  const uint64_t bytes = DecodeFixed64(*p);
  if ((bytes & 0x8080808080808080ull) != 0) return false;
  uint64_t v = *prev;
  uint32_t* o = out.data() + i;
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    v += 1 + ((bytes >> (8 * b)) & 0xff);
    o[b] = static_cast<uint32_t>(v);
  }
  if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  *prev = v;
  *p += 8;
  return true;
}

#if defined(__SSE2__)
// DecodeEightOneByteGaps for sixteen gaps from one 16-byte load, the adds
// done as prefix sums in vector lanes: each gap plus one is at most 128,
// so sixteen of them sum below 2^16 in 16-bit lanes, widened to 32 bits
// and offset by *prev only for the stores. The same result and the same
// false as DecodeEightOneByteGaps (sixteen indices and bytes).
bool DecodeSixteenOneByteGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                              uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 16 || limit - *p < 16) return false;
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(*p));
  if (_mm_movemask_epi8(bytes) != 0) return false;  // a continuation bit
  const __m128i zero = _mm_setzero_si128();
  const __m128i one = _mm_set1_epi16(1);
  __m128i lo = _mm_add_epi16(_mm_unpacklo_epi8(bytes, zero), one);  // gaps 0..7, plus one
  __m128i hi = _mm_add_epi16(_mm_unpackhi_epi8(bytes, zero), one);  // gaps 8..15
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 2));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 2));
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 4));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 4));
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 8));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 8));
  const __m128i lo_last = _mm_shufflehi_epi16(lo, 0xff);  // lanes 4..7 = lane 7
  hi = _mm_add_epi16(hi, _mm_unpackhi_epi64(lo_last, lo_last));
  const uint64_t v = *prev + static_cast<uint32_t>(_mm_extract_epi16(hi, 7));
  if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  // *prev + a lane sum <= v < 2^32: the 32-bit adds do not wrap.
  const __m128i base = _mm_set1_epi32(static_cast<int>(static_cast<uint32_t>(*prev)));
  __m128i* o = reinterpret_cast<__m128i*>(out.data() + i);
  _mm_storeu_si128(o, _mm_add_epi32(base, _mm_unpacklo_epi16(lo, zero)));
  _mm_storeu_si128(o + 1, _mm_add_epi32(base, _mm_unpackhi_epi16(lo, zero)));
  _mm_storeu_si128(o + 2, _mm_add_epi32(base, _mm_unpacklo_epi16(hi, zero)));
  _mm_storeu_si128(o + 3, _mm_add_epi32(base, _mm_unpackhi_epi16(hi, zero)));
  *prev = v;
  *p += 16;
  return true;
}
#endif

// Four gaps of one or two bytes each (base's minimal forms), the common
// case from about 0.1 to 10 % density, from one 8-byte load: each gap's
// start follows from the continuation bits before it, with no branch on
// the lengths and no load waiting for the last gap's length. False
// (nothing consumed; out[i, i + 4) may hold junk) when fewer than four
// indices or eight bytes are left, when a gap takes three bytes or more or
// is overlong (a second byte of 0), or when the last index is out of
// range: the caller's varint loop then decodes them one by one and names
// the bad one.
bool DecodeFourShortGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                         uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 4 || limit - *p < 8) return false;
  const uint64_t bytes = DecodeFixed64(*p);
  uint64_t v = *prev;
  uint32_t bad = 0;
  unsigned at = 0;  // the current gap's first bit in `bytes` (at most 48)
  uint32_t* o = out.data() + i;
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const uint32_t w = static_cast<uint32_t>(bytes >> at) & 0xffffu;
    const uint32_t two = (w >> 7) & 1;  // the first byte continues
    bad |= two & ((w >> 15) | ((w >> 8) == 0 ? 1u : 0u));
    v += 1 + ((w & 0x7fu) | ((w >> 1) & 0x3f80u & (0u - two)));
    o[g] = static_cast<uint32_t>(v);
    at += 8 + 8 * two;
  }
  if (bad != 0 || v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  *prev = v;
  *p += at / 8;
  return true;
}

}  // namespace

uint64_t FrameBytes(const FrameHeader& header) {
  uint64_t total;
  // Saturates so that a header with absurd lengths compares as "too big"
  // against any buffer instead of wrapping to a small number.
  return TotalBytes(header, &total) ? total : kU64Max;
}

absl::StatusOr<MutableFrameSections> StartFrame(const FrameHeader& header,
                                                absl::Span<uint8_t> out) {
  WireHeader h;
  h.f = header;
  h.version = FrameVersionFor(header.codec);
  uint64_t total;
  if (absl::Status s = CheckOutgoing(h, out.size(), &total); !s.ok()) return s;
  WriteHeader(h, out.data());
  return SectionsBehind(out.data(), header);
}

namespace {

// SealFrame's checks: the header in the buffer (the one the receiver will
// see; a caller may have written over it since StartFrame) against the
// buffer. Sets the bytes the checksum covers.
absl::Status CheckForSeal(absl::Span<const uint8_t> out, size_t* covered) {
  if (out.size() < kFrameHeaderBytes) {
    return Invalid(absl::StrCat("cannot seal a ", out.size(), "-byte buffer: shorter than the ",
                                kFrameHeaderBytes, "-byte header"));
  }
  const WireHeader h = ReadHeader(out.data());
  uint64_t total;
  if (absl::Status s = CheckOutgoing(h, out.size(), &total); !s.ok()) return s;
  *covered = total - kFrameChecksumBytes;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> SealFrame(absl::Span<uint8_t> out) {
  size_t covered;
  if (absl::Status s = CheckForSeal(out, &covered); !s.ok()) return s;
  EncodeFixed64(out.data() + covered, Checksum64(out.data(), covered));
  return covered + kFrameChecksumBytes;
}

absl::StatusOr<size_t> SealFrame(absl::Span<uint8_t> out, const StreamingChecksum64& sum) {
  size_t covered;
  if (absl::Status s = CheckForSeal(out, &covered); !s.ok()) return s;
  if (sum.bytes() != covered) {
    return absl::InternalError(absl::StrCat("frame checksummed over ", sum.bytes(),
                                            " bytes as it was written, but it covers ", covered));
  }
  EncodeFixed64(out.data() + covered, sum.Digest());
  return covered + kFrameChecksumBytes;
}

absl::StatusOr<ParsedFrame> ParseFrame(absl::Span<const uint8_t> frame, const FrameLimits& limits) {
  if (frame.size() < kMinFrameBytes) {
    return Invalid(absl::StrCat("truncated: ", frame.size(), " bytes, shorter than the ",
                                kMinFrameBytes, "-byte minimum (", kFrameHeaderBytes,
                                "-byte header + ", kFrameChecksumBytes, "-byte checksum)"));
  }
  const WireHeader h = ReadHeader(frame.data());
  if (absl::Status s = CheckFields(h); !s.ok()) return s;

  // Caps come before anything is sized from the header's lengths.
  if (h.f.dense_length > limits.max_dense_length) {
    return Invalid(absl::StrCat("dense_length ", h.f.dense_length,
                                " exceeds the receiver's max_dense_length ",
                                limits.max_dense_length));
  }
  if (frame.size() > limits.max_frame_bytes) {
    return Invalid(absl::StrCat("frame length ", frame.size(),
                                " exceeds the receiver's max_frame_bytes ",
                                limits.max_frame_bytes));
  }

  const uint64_t body = frame.size() - kMinFrameBytes;
  if (absl::Status s = CheckSections(h.f, body, frame.size()); !s.ok()) return s;
  if (absl::Status s = CheckElementCount(h.f); !s.ok()) return s;

  const size_t covered = frame.size() - kFrameChecksumBytes;
  const uint64_t stored = DecodeFixed64(frame.data() + covered);
  const uint64_t computed = Checksum64(frame.data(), covered);
  if (stored != computed) {
    return absl::DataLossError(absl::StrCat("wire frame: checksum mismatch (stored 0x",
                                            absl::Hex(stored, absl::kZeroPad16), ", computed 0x",
                                            absl::Hex(computed, absl::kZeroPad16), " over ",
                                            covered, " bytes): frame corrupted in transit"));
  }

  ParsedFrame parsed;
  parsed.header = h.f;
  parsed.sections = SectionsBehind(frame.data(), h.f);
  return parsed;
}

uint64_t MaxIndexBytes(IndexEncoding encoding, uint64_t count) {
  switch (encoding) {
    case IndexEncoding::kNone:
      return 0;
    case IndexEncoding::kRawU32:
      return SaturatingMul(count, 4);
    case IndexEncoding::kDeltaVarint:
      return SaturatingMul(count, kMaxVarint32Bytes);
  }
  return 0;
}

absl::StatusOr<size_t> EncodeIndices(IndexEncoding encoding, absl::Span<const uint32_t> indices,
                                     absl::Span<uint8_t> out) {
  // Delta-varint checks as it encodes (one pass over the indices), and
  // the whole list before it reports a full output, so that each encoding
  // refuses a list that is not increasing first.
  if (encoding != IndexEncoding::kDeltaVarint) {
    if (absl::Status s = CheckIncreasing(indices, 1); !s.ok()) return s;
  }
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!indices.empty()) {
        return Invalid(
            absl::StrCat("cannot encode ", indices.size(), " indices with index_encoding none"));
      }
      return size_t{0};
    case IndexEncoding::kRawU32: {
      if (out.size() / 4 < indices.size()) {
        return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                    indices.size(), " raw u32 indices"));
      }
      for (size_t i = 0; i < indices.size(); ++i) EncodeFixed32(out.data() + 4 * i, indices[i]);
      return indices.size() * 4;
    }
    case IndexEncoding::kDeltaVarint: {
      size_t pos = 0;
      for (size_t i = 0; i < indices.size(); ++i) {
        if (i > 0 && indices[i] <= indices[i - 1]) return CheckIncreasing(indices, i);
        const uint32_t v = i == 0 ? indices[0] : indices[i] - indices[i - 1] - 1;
        if (v < 0x80 && pos < out.size()) {  // one byte: dense selections' common case
          out[pos++] = static_cast<uint8_t>(v);
          continue;
        }
        if (!EncodeVarint32(out, &pos, v)) {
          if (absl::Status s = CheckIncreasing(indices, i + 1); !s.ok()) return s;
          return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                      indices.size(), " delta-varint indices (full at #", i,
                                      "); size it with MaxIndexBytes"));
        }
      }
      return pos;
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", Raw(encoding)));
}

absl::Status DecodeIndices(IndexEncoding encoding, absl::Span<const uint8_t> in,
                           uint64_t dense_length, absl::Span<uint32_t> out) {
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!in.empty() || !out.empty()) {
        return Invalid(absl::StrCat("index_encoding none carries no indices, but got ", in.size(),
                                    " bytes for ", out.size(), " indices"));
      }
      return absl::OkStatus();
    case IndexEncoding::kRawU32: {
      if (in.size() % 4 != 0 || in.size() / 4 != out.size()) {
        return Invalid(absl::StrCat("raw u32 indices: ", in.size(), " bytes for ", out.size(),
                                    " indices (need exactly ", SaturatingMul(out.size(), 4), ")"));
      }
      for (size_t i = 0; i < out.size(); ++i) {
        const uint32_t v = DecodeFixed32(in.data() + 4 * i);
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
        return Invalid(absl::StrCat("delta-varint indices: ", in.size(), " bytes cannot hold ",
                                    out.size(), " indices"));
      }
      const uint8_t* p = in.data();
      const uint8_t* const limit = in.data() + in.size();
      uint64_t prev = 0;
      [[maybe_unused]] bool dense_run = true;
      for (size_t i = 0; i < out.size(); ++i) {
#if defined(__SSE2__)
        // Sixteen at a time while the gaps run dense; after a miss, again
        // once eight have been: a sparser list (1 %, a third of its gaps
        // two bytes long) would otherwise pay a mispredicted try per index.
        if (i > 0 && dense_run) {
          if (DecodeSixteenOneByteGaps(&p, limit, &prev, dense_length, out, i)) {
            i += 15;
            continue;
          }
          dense_run = false;
        }
#endif
        if (i > 0 && DecodeEightOneByteGaps(&p, limit, &prev, dense_length, out, i)) {
          dense_run = true;
          i += 7;
          continue;
        }
        if (i > 0 && DecodeFourShortGaps(&p, limit, &prev, dense_length, out, i)) {
          i += 3;
          continue;
        }
        // base's strict grammar (minimal, <= 5 bytes, < 2^32). A gap of one
        // or two bytes, the common case, without a branch on which: at 1 %
        // density about a third of the gaps take two bytes, in no pattern,
        // and a branch on the length mispredicted on each of them.
        uint32_t raw = 0;
        uint32_t w = 0;
        if (limit - p >= 2) w = p[0] | uint32_t{p[1]} << 8;
        const uint32_t two = (w >> 7) & 1;  // the first byte continues
        // Fewer than two bytes left, a third byte, or a second byte of 0
        // (overlong): base's decoder, which takes the long form or fails.
        if (limit - p >= 2 && (two & ((w >> 15) | ((w >> 8) == 0 ? 1u : 0u))) == 0) {
          raw = (w & 0x7fu) | ((w >> 1) & 0x3f80u & (0u - two));
          p += 1 + two;
        } else {
          const uint8_t* next = GetVarint32Ptr(p, limit, &raw);
          if (next == nullptr) return VarintError(in, static_cast<size_t>(p - in.data()), i);
          p = next;
        }
        // Gaps are stored minus one, so strictly increasing holds by
        // construction; the u64 sum cannot wrap (< 2^33).
        const uint64_t v = i == 0 ? raw : prev + 1 + raw;
        if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) {
          return Invalid(absl::StrCat(
              "delta-varint indices: index #", i, " = ", v, " is not below dense_length ",
              dense_length, v > std::numeric_limits<uint32_t>::max() ? " (and exceeds u32)" : ""));
        }
        out[i] = static_cast<uint32_t>(v);
        prev = v;
      }
      if (p != limit) {
        return Invalid(absl::StrCat("delta-varint indices: ", limit - p, " trailing bytes after ",
                                    out.size(), " indices (section of ", in.size(), " bytes)"));
      }
      return absl::OkStatus();
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", Raw(encoding)));
}

}  // namespace gradwire
