// Internal to :codec: the decode side shared by the codecs whose frames
// touch every element and need no scratch (cast: none/fp16/bf16;
// quantized: QSGD, sign). Each implements two steps, checking a frame's
// header (CodecBase::CheckHeader) and adding its decoded values, and gets
// DecodeAccumulate and DecodeAverage from them.
#ifndef GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_
#define GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/internal/codec_base.h"
#include "gradwire/lib/codec/internal/device_staging.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {
namespace codec_internal {

class DenseFrameCodec : public CodecBase {
 protected:
  using CodecBase::CodecBase;

  // Adds the decoded values of elements [begin, begin + dense.size()) of a
  // checked frame to `dense`; begin is a multiple of ChunkQuantum(). The
  // frame's sections and `dense` live in one place (on the device: copies
  // of the sections, and the kernel runs on `stream`).
  virtual absl::Status Apply(const ParsedFrame& frame, uint64_t begin, absl::Span<float> dense,
                             kernels::cuda::Stream stream) const = 0;
  // What Apply accepts as a start (QSGD and sign: whole buckets of whole
  // bytes of codes).
  virtual uint64_t ChunkQuantum() const { return 1; }

  // On the host: sets `out`, elements [begin, begin + out.size()) (begin a
  // multiple of ChunkQuantum()), to the average of checked frames: zeros,
  // plus each frame's values in order (Apply), divided by `divisor`
  // (DivideAll). Codecs with a fused kernel that gives those bits in one
  // pass override it; this is the three steps.
  virtual absl::Status AverageOnHost(absl::Span<const ParsedFrame> frames, uint64_t begin,
                                     float divisor, absl::Span<float> out) const {
    std::fill(out.begin(), out.end(), 0.0f);
    for (const ParsedFrame& p : frames) GRADWIRE_RETURN_IF_ERROR(Apply(p, begin, out, nullptr));
    return kernels::DivideAll(out.data(), out.size(), divisor);
  }

  // Whether checked frames can be averaged (added in order, then divided
  // by `divisor`) without leaving fp32's range; on refusal sets
  // *bad_frame. Codecs that can bound their decoded values override it.
  virtual absl::Status CheckAverage(absl::Span<const ParsedFrame> /*frames*/, float /*divisor*/,
                                    size_t* /*bad_frame*/) const {
    return absl::OkStatus();
  }

  absl::Status DecodeAccumulateWith(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                    CodecScratch& /*scratch: none needed*/,
                                    const DeviceCall* device) const final {
    absl::StatusOr<ParsedFrame> parsed = CheckFrame(frame, dense.size());
    if (!parsed.ok()) return parsed.status();
    return ApplyAll(absl::MakeConstSpan(&*parsed, 1), dense, device);
  }

  // Every frame, and the set (CheckAverage), is checked before `out` is
  // written; then out is zeroed, the frames are added in order and out is
  // divided: the reference's arithmetic. On the host chunk by chunk of out
  // (about 32 KiB, in L1, AverageOnHost), so that out is written once
  // rather than read and written by every frame and the division.
  absl::Status DecodeAverageWith(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                                 absl::Span<float> out, CodecScratch& /*scratch: none needed*/,
                                 size_t* bad_frame, const DeviceCall* device,
                                 FrameIntegrity integrity) const final {
    absl::InlinedVector<ParsedFrame, 16> parsed;
    parsed.reserve(frames.size());
    for (size_t r = 0; r < frames.size(); ++r) {
      absl::StatusOr<ParsedFrame> p = CheckFrame(frames[r], out.size(), integrity);
      if (!p.ok()) {
        *bad_frame = r;
        return p.status();
      }
      parsed.push_back(*std::move(p));
    }
    if (absl::Status s = CheckAverage(parsed, divisor, bad_frame); !s.ok()) return s;
    if (device != nullptr) {
      // The device: zero, every frame in order, one division.
      GRADWIRE_RETURN_IF_ERROR(FillZero(device, out));
      GRADWIRE_RETURN_IF_ERROR(ApplyAll(parsed, out, device));
      return kernels::DivideAll(out.data(), out.size(), divisor, device->stream);
    }
    constexpr uint64_t kChunk = 8192;
    const uint64_t quantum = ChunkQuantum();
    const uint64_t chunk = (kChunk + quantum - 1) / quantum * quantum;
    // No software prefetch of the next chunk's frame bytes: the fused
    // kernels read every frame as a sequential stream, which the hardware
    // prefetcher follows, and a burst of a chunk's worth of prefetches
    // stalled on the line-fill buffers (QSGD 8-bit decode-average 10 %
    // slower with it, 2026-11-28-qsgd-decode.md).
    for (uint64_t begin = 0; begin < out.size(); begin += chunk) {
      GRADWIRE_RETURN_IF_ERROR(AverageOnHost(parsed, begin, divisor, out.subspan(begin, chunk)));
    }
    return absl::OkStatus();
  }

 private:
  // Applies checked frames in order to all of `out`: on the host directly,
  // on the device from copies of their sections (one upload for all).
  absl::Status ApplyAll(absl::Span<const ParsedFrame> frames, absl::Span<float> out,
                        const DeviceCall* device) const {
    absl::InlinedVector<absl::Span<const uint8_t>, 32> ins;
    for (const ParsedFrame& f : frames) {
      ins.push_back(f.sections.scales);
      ins.push_back(f.sections.values);
    }
    return RunDecodeKernel(
        device, ins, [&](absl::Span<const uint8_t* const> at, kernels::cuda::Stream stream) {
          for (size_t r = 0; r < frames.size(); ++r) {
            ParsedFrame staged = frames[r];
            staged.sections.scales = {at[2 * r], frames[r].sections.scales.size()};
            staged.sections.values = {at[2 * r + 1], frames[r].sections.values.size()};
            GRADWIRE_RETURN_IF_ERROR(Apply(staged, 0, out, stream));
          }
          return absl::OkStatus();
        });
  }
};

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_INTERNAL_DENSE_FRAME_CODEC_H_
