// The compact-gradient frame: what one rank sends for one gradient bucket.
//
// Byte-level grammar: docs/wire_format.md. Every multi-byte field is little
// endian. A frame is
//
//   header (kFrameHeaderBytes) | indices | scales | values | checksum (8)
//
// where the three sections' lengths are in the header and the checksum is
// XXH3-64 over header and sections. A codec decides what the sections hold;
// this file only frames them and refuses anything malformed before a
// decoder touches memory. Nothing here allocates.
#ifndef GRADWIRE_LIB_CODEC_WIRE_FORMAT_H_
#define GRADWIRE_LIB_CODEC_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/base/envelope.h"

namespace gradwire {

inline constexpr uint32_t kFrameMagic = 0x31465747;  // bytes "GWF1"
inline constexpr size_t kFrameHeaderBytes = 72;
inline constexpr size_t kFrameChecksumBytes = 8;

// Which codec produced the frame. Values are part of the wire format.
enum class CodecId : uint8_t {
  kDense = 0,  // fp32 values, no compression
  kFp16 = 1,
  kBf16 = 2,
  kTopK = 3,
  kApproxTopK = 4,
  kRandomK = 5,
  kQsgd = 6,
  kSign = 7,
};
inline constexpr uint8_t kMaxCodecId = 7;

// Versions (docs/wire_format.md, "Versioning"). Every codec's frames are
// version 1 except random-k's and QSGD's, version 2:
// - random-k since its indices come from kernels/element_math.h's 32-bit
//   element hash (version 1: splitmix64 per element). Random-k frames
//   carry no indices and a receiver re-derives them, so a frame of the
//   other hash would decode to the wrong indices without any error.
// - QSGD since its levels are RN((2q - M) * step), step = s / M rounded
//   toward zero (version 1: RN(RN((2q - M) / M) * s)). The same codes
//   decode a float or so apart, so a receiver of the other build would
//   sum values the sender's error feedback did not subtract.
// Each side refuses the other's frames of these codecs by version instead.
// Other codecs' bytes mean what they meant, and their frames still pass
// between builds.
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr uint8_t kRandomKFrameVersion = 2;
inline constexpr uint8_t kQsgdFrameVersion = 2;
inline constexpr uint8_t kMaxFrameVersion = 2;

// The version every frame of `codec` carries (and the only one accepted).
constexpr uint8_t FrameVersionFor(CodecId codec) {
  return codec == CodecId::kRandomK ? kRandomKFrameVersion
         : codec == CodecId::kQsgd  ? kQsgdFrameVersion
                                    : kFrameVersion;
}

// How values are stored in the values section. kPacked: bit-packed integer
// levels (QSGD, sign), width given by quant_bits.
enum class ValueType : uint8_t {
  kFp32 = 0,
  kFp16 = 1,
  kBf16 = 2,
  kPacked = 3,
};
inline constexpr uint8_t kMaxValueType = 3;

// How the indices section stores element indices (always strictly
// increasing, each < dense_length, so dense_length is at most 2^32).
enum class IndexEncoding : uint8_t {
  kNone = 0,         // no indices: dense, quantized, or random-k (seeded)
  kRawU32 = 1,       // count * u32
  kDeltaVarint = 2,  // first index, then gaps - 1, each LEB128
};
inline constexpr uint8_t kMaxIndexEncoding = 2;

// Flag bits; every other bit must be zero.
inline constexpr uint8_t kFlagErrorFeedback = 1 << 0;  // sender applied EF
// The sender's gradient plus residual held a NaN or an infinity (the
// encoder's EncodeStats::nonfinite > 0). The values carry what the codec
// made of the rest; a receiver decodes the whole frame as NaN (codec.h), so
// that every rank sees the non-finite step, as a dense allreduce would show
// it (a loss scaler then skips the step on every rank).
inline constexpr uint8_t kFlagNonFinite = 1 << 1;
inline constexpr uint8_t kKnownFlags = kFlagErrorFeedback | kFlagNonFinite;

struct FrameHeader {
  CodecId codec = CodecId::kDense;
  ValueType value_type = ValueType::kFp32;
  IndexEncoding index_encoding = IndexEncoding::kNone;
  uint8_t quant_bits = 0;  // 1..8 for kPacked values, else 0
  uint8_t flags = 0;
  uint32_t bucket_size = 0;    // elements per scale (quantizers), else 0
  uint64_t dense_length = 0;   // n: elements of the dense gradient
  uint64_t element_count = 0;  // values carried (k for sparse codecs)
  uint64_t step = 0;           // training step the gradient belongs to
  uint64_t seed = 0;           // shared seed (random-k indices, rounding)
  uint64_t index_bytes = 0;
  uint64_t scale_bytes = 0;
  uint64_t value_bytes = 0;
};

// What vouches for a frame's bytes as it is parsed: its checksum, verified
// then (kChecksum), or the caller (kVerifiedByCaller), who has checked
// every byte already: a MAC it verified (FrameSigner::Verify, frame_auth.h:
// the frames the exchanges in lib/comm receive) or a frame it has just
// encoded itself. The checksum could then only repeat that with a pass of
// its own over the frame. Either way the frame holds its 8 checksum bytes
// and every other check applies.
enum class FrameIntegrity { kChecksum, kVerifiedByCaller };

// Caps a receiver enforces before trusting any length in a frame.
struct FrameLimits {
  uint64_t max_dense_length = uint64_t{1} << 32;
  uint64_t max_frame_bytes = uint64_t{1} << 32;
  FrameIntegrity integrity = FrameIntegrity::kChecksum;
};

template <typename Byte>
struct FrameSectionsT {
  absl::Span<Byte> indices;
  absl::Span<Byte> scales;
  absl::Span<Byte> values;
};
using FrameSections = FrameSectionsT<const uint8_t>;
using MutableFrameSections = FrameSectionsT<uint8_t>;

// Total bytes of a frame whose sections have the header's lengths.
uint64_t FrameBytes(const FrameHeader& header);

// Writes `header` at the front of `out` and returns the three section spans
// behind it for the caller to fill. InvalidArgument if the header is not
// valid by the rules ParseFrame applies, or `out` is too small.
absl::StatusOr<MutableFrameSections> StartFrame(const FrameHeader& header, absl::Span<uint8_t> out);

// Computes and stores the checksum once the sections are filled; returns
// the frame's length (FrameBytes(header)).
absl::StatusOr<size_t> SealFrame(absl::Span<uint8_t> out);

// SealFrame for a frame checksummed while it was written: `sum` has seen
// the header and then the sections, in order, as they were filled (chunk
// by chunk while in cache), so the frame is not read again. The same
// checks and the same bytes as SealFrame; Internal if `sum` did not see
// exactly the bytes the checksum covers.
absl::StatusOr<size_t> SealFrame(absl::Span<uint8_t> out, const StreamingChecksum64& sum);

// Sets kFlagNonFinite in the header of a frame StartFrame wrote into
// `out`; seal it afterwards (SealFrame without a streaming sum: the header
// changed). `out` must hold at least the header.
void MarkFrameNonFinite(absl::Span<uint8_t> out);

// Whether `frame`, which ParseFrame accepted, has kFlagNonFinite set.
bool FrameIsNonFinite(absl::Span<const uint8_t> frame);

struct ParsedFrame {
  FrameHeader header;
  FrameSections sections;  // views into the parsed bytes
};

// Validates `frame` (exactly one frame) and returns views of its parts.
// Checks, in order: length, magic, version known, enum ranges, version of
// the codec (FrameVersionFor), reserved bits,
// caps, section lengths against the frame length, element_count <=
// dense_length, checksum (unless limits.integrity is kVerifiedByCaller). Each
// failure has its own message (DataLoss for a checksum mismatch,
// InvalidArgument otherwise). Codec-specific consistency
// (e.g. value bytes == count * width) is the codec's to check.
absl::StatusOr<ParsedFrame> ParseFrame(absl::Span<const uint8_t> frame, const FrameLimits& limits);

// The index section (index_coding.cc).

// Most bytes `count` indices can take in `encoding`.
uint64_t MaxIndexBytes(IndexEncoding encoding, uint64_t count);

// Encodes strictly increasing `indices` (each < 2^32) into `out`; returns
// the bytes of the encoding. Bytes of `out` past them may be overwritten
// (never any outside `out`).
absl::StatusOr<size_t> EncodeIndices(IndexEncoding encoding, absl::Span<const uint32_t> indices,
                                     absl::Span<uint8_t> out);

// Decodes exactly out.size() indices from `in`, which must be consumed
// exactly, and checks each is < dense_length and strictly increasing.
absl::Status DecodeIndices(IndexEncoding encoding, absl::Span<const uint8_t> in,
                           uint64_t dense_length, absl::Span<uint32_t> out);

// DecodeIndices(kDeltaVarint)'s checks and statuses for a section of
// `count` indices, without memory for them: a scan sums the gaps (the
// indices increase by construction, so only the last must be below
// dense_length), and only a section it refuses is decoded, a piece at a
// time, to name the fault.
absl::Status CheckDeltaVarintIndices(absl::Span<const uint8_t> in, uint64_t count,
                                     uint64_t dense_length);

// A delta-varint index section decoded a piece at a time, with
// DecodeIndices' checks and messages (an index is named by its ordinal in
// the section): what checks a section without storing all of its indices
// (CheckDeltaVarintIndices). DecodeIndices(kDeltaVarint) is one Read of
// all and Finish, after it refuses a section of fewer bytes than indices.
class DeltaVarintReader {
 public:
  // The section `in` holds `count` indices, each < dense_length. `in`
  // must outlive the reader.
  DeltaVarintReader(absl::Span<const uint8_t> in, uint64_t count, uint64_t dense_length);

  // Decodes the next out.size() indices (at most remaining()) into `out`.
  // After an error the reader is spent: what it read since the last OK is
  // undefined.
  absl::Status Read(absl::Span<uint32_t> out);

  // Once every index is read: OK if the section was consumed exactly.
  absl::Status Finish() const;

  uint64_t remaining() const { return count_ - read_; }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;  // the next byte to decode
  const uint8_t* limit_;
  uint64_t count_;
  uint64_t dense_length_;
  uint64_t read_ = 0;
  uint64_t prev_ = 0;  // the last index read (when read_ > 0)
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_WIRE_FORMAT_H_
