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

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/lib/codec/wire_error.h"

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

using wire_internal::Invalid;

// What a codec's frames mean since their version moved past 1, and why a
// frame of another version cannot be used here (wire_format.h, "Versions");
// nullptr for the codecs whose frames are still version 1.
struct FrameChange {
  const char* name;
  const char* now;
  const char* why;
};

const FrameChange* FrameChangeOf(CodecId codec) {
  static constexpr FrameChange kRandomK = {
      "random-k", "indices from the 32-bit element hash",
      "the sender derives its indices from another hash, so they cannot be re-derived here"};
  static constexpr FrameChange kQsgd = {
      "qsgd", "levels (2q - M) * step, step = scale / M rounded toward zero",
      "the sender's levels differ, so its error feedback would not match what is decoded here"};
  switch (codec) {
    case CodecId::kRandomK:
      return &kRandomK;
    case CodecId::kQsgd:
      return &kQsgd;
    default:
      return nullptr;
  }
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
    if (const FrameChange* change = FrameChangeOf(f.codec); change != nullptr) {
      return Invalid(absl::StrCat(change->name, " frame of version ", h.version, ": this build's ",
                                  change->name, " frames are version ", FrameVersionFor(f.codec),
                                  " (", change->now, "); ", change->why,
                                  ". Run one gradwire build on every rank"));
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

void MarkFrameNonFinite(absl::Span<uint8_t> out) { out[kFlagsAt] |= kFlagNonFinite; }

bool FrameIsNonFinite(absl::Span<const uint8_t> frame) {
  return (frame[kFlagsAt] & kFlagNonFinite) != 0;
}

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
  if (limits.integrity == FrameIntegrity::kChecksum) {
    const uint64_t stored = DecodeFixed64(frame.data() + covered);
    const uint64_t computed = Checksum64(frame.data(), covered);
    if (stored != computed) {
      return absl::DataLossError(absl::StrCat("wire frame: checksum mismatch (stored 0x",
                                              absl::Hex(stored, absl::kZeroPad16), ", computed 0x",
                                              absl::Hex(computed, absl::kZeroPad16), " over ",
                                              covered, " bytes): frame corrupted in transit"));
    }
  }

  ParsedFrame parsed;
  parsed.header = h.f;
  parsed.sections = SectionsBehind(frame.data(), h.f);
  return parsed;
}

}  // namespace gradwire
