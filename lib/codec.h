// A codec turns a dense fp32 gradient into one wire frame and back.
//
// The shape follows CUB: ask how large the output can be, encode into a
// caller-owned buffer, decode-and-accumulate into a caller-owned dense
// buffer. A codec holds no per-gradient state: error feedback lives in an
// ErrorFeedback object (error_feedback.h) which passes its residual to
// Encode so the kernel can fuse "add residual, compress, store new
// residual" into one pass.
//
// Error-feedback contract, per element i, with acc = fl(g[i] + e_old[i]):
//   e_new[i] == fl(acc - decode(frame)[i])       (bit for bit, every codec,
//       whenever that is finite; see the non-finite policy)
//   fl(decode(frame)[i] + e_new[i]) == acc       (bit for bit whenever the
//       subtraction is exact: always for selection and cast codecs; for
//       quantizers when the decoded value is within a factor 2 of acc)
// Non-finite policy: NaN ranks lowest for selection (never chosen ahead of
// a number), ±Inf highest; a residual element that would be NaN or ±Inf is
// reset to 0 (so one bad step cannot poison every later one), and
// non-finite acc elements are counted in EncodeStats.
//
// Which codec does what: cast_codec.h (none, fp16, bf16), sparse_codec.h
// (topk, approx_topk, randomk), quantized_codec.h (qsgd, sign).
#ifndef GRADWIRE_LIB_CODEC_H_
#define GRADWIRE_LIB_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/compression_spec.h"
#include "gradwire/lib/wire_format.h"

namespace gradwire {

struct EncodeStats {
  size_t frame_bytes = 0;     // bytes written to the output
  uint64_t selected = 0;      // values carried (k for sparse codecs)
  uint64_t nonfinite = 0;     // NaN/Inf elements seen in g + e_old
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual const CompressionSpec& spec() const = 0;

  // Largest frame Encode can write for a gradient of n elements.
  virtual size_t MaxEncodedBytes(uint64_t n) const = 0;

  // Encodes gradient `grad` for training step `step` into `out`, which
  // must hold MaxEncodedBytes(grad.size()). If `residual` is non-empty
  // (same length as grad) the codec encodes grad + residual and overwrites
  // residual with the new residual. Arguments are checked before anything
  // is written: a refused call leaves residual as it was. grad.size() is at
  // most 2^32.
  virtual absl::StatusOr<EncodeStats> Encode(absl::Span<const float> grad, uint64_t step,
                                             absl::Span<float> residual,
                                             absl::Span<uint8_t> out) const = 0;

  // Validates `frame` completely (wire format, codec id and settings match
  // this codec, lengths, indices), then adds its decoded values to `dense`,
  // whose length must equal the frame's dense length. Nothing in `dense`
  // changes unless the whole frame is valid.
  virtual absl::Status DecodeAccumulate(absl::Span<const uint8_t> frame,
                                        absl::Span<float> dense) const = 0;
};

// Builds the codec for `spec` (validated first).
absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CompressionSpec& spec);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_H_
