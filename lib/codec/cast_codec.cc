#include "gradwire/lib/codec/cast_codec.h"

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/internal/codec_frame.h"
#include "gradwire/lib/codec/internal/dense_frame_codec.h"
#include "gradwire/lib/codec/internal/device_staging.h"

namespace gradwire {
namespace {

using codec_internal::FieldMismatch;

class CastCodec : public codec_internal::DenseFrameCodec {
 public:
  explicit CastCodec(const CompressionSpec& spec) : DenseFrameCodec(spec) {
    switch (spec.method) {
      case Method::kFp16:
        type_ = ValueType::kFp16;
        break;
      case Method::kBf16:
        type_ = ValueType::kBf16;
        break;
      default:
        type_ = ValueType::kFp32;
        break;
    }
    format_ = codec_internal::ToFormat(type_);
  }

  size_t MaxEncodedBytes(uint64_t n) const override {
    return kFrameHeaderBytes + kFrameChecksumBytes + n * kernels::ValueWidth(format_);
  }

  absl::StatusOr<EncodeStats> EncodeWith(absl::Span<const float> grad, uint64_t step,
                                         absl::Span<float> residual, absl::Span<uint8_t> out,
                                         CodecScratch& /*scratch: none needed*/,
                                         const DeviceCall* device) const override {
    const uint64_t n = grad.size();
    FrameHeader h = HeaderFor(type_, n, n, step, !residual.empty());
    h.value_bytes = n * kernels::ValueWidth(format_);
    absl::StatusOr<MutableFrameSections> sections = StartFrame(h, out);
    if (!sections.ok()) return sections.status();
    kernels::FusedStats fs;
    if (device == nullptr) {
      // One pass over memory: each chunk of values is checksummed as soon
      // as the cast has written it, while it is in cache, after the header.
      StreamingChecksum64 sum;
      sum.Update(out.data(), kFrameHeaderBytes);
      GRADWIRE_RETURN_IF_ERROR(kernels::CastCompressInChunks(
          grad.data(), residual.empty() ? nullptr : residual.data(), n, format_,
          sections->values.data(), &fs,
          [&sum](const uint8_t* chunk, uint64_t bytes) { sum.Update(chunk, bytes); }));
      return codec_internal::SealWithStats(out, sum, fs);
    }
    const absl::Span<uint8_t> outs[] = {sections->values};
    GRADWIRE_RETURN_IF_ERROR(codec_internal::RunEncodeKernel(
        device, outs, nullptr, 0, &fs,
        [&](absl::Span<uint8_t* const> o, void*, kernels::FusedStats* stats,
            kernels::cuda::Stream stream) {
          return kernels::CastCompress(grad.data(), residual.empty() ? nullptr : residual.data(), n,
                                       format_, o[0], stats, stream);
        }));
    return codec_internal::SealWithStats(out, fs);
  }

 private:
  absl::Status CheckHeader(const ParsedFrame& frame, uint64_t n) const override {
    const FrameHeader& h = frame.header;
    return codec_internal::CheckFields(
        name(), {{"value_type", static_cast<uint64_t>(h.value_type), static_cast<uint64_t>(type_),
                  "dense codecs fix their value type"},
                 {"index_encoding", static_cast<uint64_t>(h.index_encoding), 0,
                  "dense frames carry no indices"},
                 {"bucket_size", h.bucket_size, 0, "unused"},
                 {"element_count", h.element_count, n, "dense frames carry n values"},
                 {"scale_bytes", h.scale_bytes, 0, "no scales"},
                 {"value_bytes", h.value_bytes, n * kernels::ValueWidth(format_),
                  "n values of the codec's width"}});
  }

  absl::Status Apply(const ParsedFrame& parsed, uint64_t begin, absl::Span<float> dense,
                     kernels::cuda::Stream stream) const override {
    return kernels::CastDecodeAccumulate(
        parsed.sections.values.data() + begin * kernels::ValueWidth(format_), dense.size(), format_,
        dense.data(), stream);
  }

  absl::Status AverageOnHost(absl::Span<const ParsedFrame> frames, uint64_t begin, float divisor,
                             absl::Span<float> out) const override {
    absl::InlinedVector<const uint8_t*, 16> values;
    for (const ParsedFrame& f : frames) {
      values.push_back(f.sections.values.data() + begin * kernels::ValueWidth(format_));
    }
    return kernels::CastDecodeAverage(values, out.size(), format_, divisor, out.data());
  }

  ValueType type_;
  kernels::ValueFormat format_;
};

}  // namespace

std::unique_ptr<Codec> NewCastCodec(const CompressionSpec& spec) {
  return std::make_unique<CastCodec>(spec);
}

}  // namespace gradwire
