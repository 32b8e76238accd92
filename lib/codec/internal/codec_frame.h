// Internal to the codec implementations: the checks and conversions every
// codec shares between its Encode and its DecodeAccumulate.
#ifndef GRADWIRE_LIB_CODEC_INTERNAL_CODEC_FRAME_H_
#define GRADWIRE_LIB_CODEC_INTERNAL_CODEC_FRAME_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {
struct EncodeStats;  // codec.h

namespace codec_internal {

// Largest gradient a frame can describe: indices are u32.
inline constexpr uint64_t kMaxDenseLength = uint64_t{1} << 32;

kernels::ValueFormat ToFormat(ValueType type);  // fp32/fp16/bf16 only

// The codec id a method's frames carry.
CodecId CodecIdFor(Method method);

// Encode's argument checks, all made before the kernel overwrites the
// residual (a refused call must lose nothing): n within kMaxDenseLength,
// residual empty or of grad's length, output of at least max_bytes.
absl::Status CheckEncodeArgs(absl::Span<const float> grad, absl::Span<float> residual,
                             size_t out_bytes, uint64_t max_bytes);

// Parses `frame` with caps derived from the receiver's own buffer (dense
// length = dense.size(); frame no larger than any codec's frame for that
// length, 9 bytes per element plus framing, so that a frame from a
// differently configured sender reaches the codec's own checks and gets a
// specific message) and checks the codec-independent half of "this frame
// is for me": codec id and dense length. `integrity`: FrameLimits'.
absl::StatusOr<ParsedFrame> ParseFrameFor(absl::Span<const uint8_t> frame, CodecId codec,
                                          uint64_t dense_length,
                                          FrameIntegrity integrity = FrameIntegrity::kChecksum);

// The last step of every Encode: checksums the filled frame in `out` and
// reports it with the kernel's counts.
absl::StatusOr<EncodeStats> SealWithStats(absl::Span<uint8_t> out,
                                          const kernels::FusedStats& counts);
// The same for a frame checksummed as it was written (SealFrame's `sum`).
absl::StatusOr<EncodeStats> SealWithStats(absl::Span<uint8_t> out, const StreamingChecksum64& sum,
                                          const kernels::FusedStats& counts);

// InvalidArgument "<codec> frame: <field> is <got>, expected <want> (...)".
absl::Status FieldMismatch(absl::string_view codec, absl::string_view field, uint64_t got,
                           uint64_t want, absl::string_view why);

// One header field a codec requires: its value in the frame, the value the
// codec expects, and why (for the message).
struct ExpectedField {
  absl::string_view field;
  uint64_t got;
  uint64_t want;
  absl::string_view why;
};

// The first field whose value differs, as FieldMismatch; OK if none does.
// Codecs list their header requirements in order, checked in that order.
absl::Status CheckFields(absl::string_view codec, std::initializer_list<ExpectedField> fields);

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_INTERNAL_CODEC_FRAME_H_
