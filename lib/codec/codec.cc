#include "gradwire/lib/codec/codec.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/codec/cast_codec.h"
#include "gradwire/lib/codec/internal/codec_frame.h"
#include "gradwire/lib/codec/internal/device_staging.h"
#include "gradwire/lib/codec/quantized_codec.h"
#include "gradwire/lib/codec/sparse_codec.h"

namespace gradwire {

uint8_t* CodecScratch::Get(size_t bytes) {
  if (bytes > capacity_) {
    // Round up to whole cache lines; operator new[] of uint64_t aligns to
    // 16, the extra line lets us hand out a 64-byte aligned pointer.
    const size_t words = (bytes + 63) / 64 * 8 + 8;
    storage_.reset(new uint64_t[words]);
    capacity_ = bytes;
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(storage_.get());
  return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t{63});
}

absl::StatusOr<EncodeStats> Codec::Encode(absl::Span<const float> grad, uint64_t step,
                                          absl::Span<float> residual, absl::Span<uint8_t> out,
                                          CodecScratch* scratch, const DeviceCall* device) const {
  GRADWIRE_ASSIGN_OR_RETURN(const DeviceCall* on,
                            codec_internal::WhereToRun("Encode", grad.data(), out.data(), device));
  GRADWIRE_RETURN_IF_ERROR(
      codec_internal::CheckEncodeArgs(grad, residual, out.size(), MaxEncodedBytes(grad.size())));
  if (scratch != nullptr) return EncodeWith(grad, step, residual, out, *scratch, on);
  CodecScratch own;
  return EncodeWith(grad, step, residual, out, own, on);
}

absl::Status Codec::DecodeAccumulate(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                     CodecScratch* scratch, const DeviceCall* device) const {
  GRADWIRE_ASSIGN_OR_RETURN(
      const DeviceCall* on,
      codec_internal::WhereToRun("DecodeAccumulate", dense.data(), frame.data(), device));
  CodecScratch own;
  GRADWIRE_RETURN_IF_ERROR(
      DecodeAccumulateWith(frame, dense, scratch != nullptr ? *scratch : own, on));
  // Valid, so it holds a header: a sender's non-finite input reaches every
  // receiver as NaN, whatever its codec kept of it.
  if (FrameIsNonFinite(frame)) return codec_internal::FillNaN(on, dense);
  return absl::OkStatus();
}

absl::Status Codec::DecodeAverage(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                                  absl::Span<float> out, CodecScratch* scratch, size_t* bad_frame,
                                  const DeviceCall* device, FrameIntegrity integrity) const {
  size_t ignored = 0;
  if (bad_frame == nullptr) bad_frame = &ignored;
  // A NaN divisor fails both comparisons; a negative one would turn the
  // untouched zeros of a sparse sum into -0.
  if (!(divisor > 0.0f) || !(divisor <= std::numeric_limits<float>::max())) {
    *bad_frame = frames.size();
    return absl::InvalidArgumentError(
        absl::StrCat("DecodeAverage: divisor must be positive and finite, got ", divisor));
  }
  absl::StatusOr<const DeviceCall*> on =
      codec_internal::WhereToRun("DecodeAverage", out.data(), nullptr, device);
  for (size_t r = 0; on.ok() && r < frames.size(); ++r) {
    on = codec_internal::WhereToRun("DecodeAverage", out.data(), frames[r].data(), device);
  }
  if (!on.ok()) {
    *bad_frame = frames.size();
    return on.status();
  }
  CodecScratch own;
  GRADWIRE_RETURN_IF_ERROR(DecodeAverageWith(
      frames, divisor, out, scratch != nullptr ? *scratch : own, bad_frame, *on, integrity));
  for (const absl::Span<const uint8_t> frame : frames) {
    if (FrameIsNonFinite(frame)) return codec_internal::FillNaN(*on, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CompressionSpec& spec) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  switch (spec.method) {
    case Method::kNone:
    case Method::kFp16:
    case Method::kBf16:
      return NewCastCodec(spec);
    case Method::kTopK:
    case Method::kApproxTopK:
    case Method::kRandomK:
      return NewSparseCodec(spec);
    case Method::kQsgd:
    case Method::kSign:
      return NewQuantizedCodec(spec);
  }
  return absl::InvalidArgumentError("--compression: unknown method");
}

}  // namespace gradwire
