// Internal to :codec: the decode side shared by the codecs whose frames
// touch every element and need no scratch (cast: none/fp16/bf16;
// quantized: QSGD, sign). Each implements two steps, checking a frame and
// adding its decoded values, and gets DecodeAccumulate and DecodeAverage
// from them.
#ifndef GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_
#define GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {
namespace codec_internal {

class DenseFrameCodec : public Codec {
 protected:
  // Everything DecodeAccumulate checks, for a dense length of n.
  virtual absl::StatusOr<ParsedFrame> CheckFrame(absl::Span<const uint8_t> frame,
                                                 uint64_t n) const = 0;
  // Adds a checked frame's decoded values to `dense` (its dense length).
  virtual void Apply(const ParsedFrame& frame, absl::Span<float> dense) const = 0;
  // Whether checked frames can be averaged (added in order, then divided
  // by `divisor`) without leaving fp32's range; on refusal sets
  // *bad_frame. Codecs that can bound their decoded values override it.
  virtual absl::Status CheckAverage(absl::Span<const ParsedFrame> /*frames*/, float /*divisor*/,
                                    size_t* /*bad_frame*/) const {
    return absl::OkStatus();
  }

  absl::Status DecodeAccumulateWith(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                    CodecScratch& /*scratch: none needed*/) const final {
    absl::StatusOr<ParsedFrame> parsed = CheckFrame(frame, dense.size());
    if (!parsed.ok()) return parsed.status();
    Apply(*parsed, dense);
    return absl::OkStatus();
  }

  // Every frame, and the set (CheckAverage), is checked before `out` is
  // written; then out is zeroed,
  // the frames are added in order and out is divided in place: the
  // reference's arithmetic, with the sum kept in `out`.
  absl::Status DecodeAverageWith(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                                 absl::Span<float> out, CodecScratch& /*scratch: none needed*/,
                                 size_t* bad_frame) const final {
    absl::InlinedVector<ParsedFrame, 16> parsed;
    parsed.reserve(frames.size());
    for (size_t r = 0; r < frames.size(); ++r) {
      absl::StatusOr<ParsedFrame> p = CheckFrame(frames[r], out.size());
      if (!p.ok()) {
        *bad_frame = r;
        return p.status();
      }
      parsed.push_back(*std::move(p));
    }
    if (absl::Status s = CheckAverage(parsed, divisor, bad_frame); !s.ok()) return s;
    std::fill(out.begin(), out.end(), 0.0f);
    for (const ParsedFrame& p : parsed) Apply(p, out);
    for (float& x : out) x /= divisor;
    return absl::OkStatus();
  }
};

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_
