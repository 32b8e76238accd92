#include "gradwire/lib/codec/quantized_codec.h"

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

class QuantizedCodec : public codec_internal::DenseFrameCodec {
 public:
  explicit QuantizedCodec(const CompressionSpec& spec)
      : DenseFrameCodec(spec),
        bits_(spec.method == Method::kSign ? 1u : static_cast<uint32_t>(spec.quant_bits)) {}

  size_t MaxEncodedBytes(uint64_t n) const override {
    return kFrameHeaderBytes + kFrameChecksumBytes + ScaleBytes(n) + kernels::PackedBytes(n, bits_);
  }

  absl::StatusOr<EncodeStats> EncodeWith(absl::Span<const float> grad, uint64_t step,
                                         absl::Span<float> residual, absl::Span<uint8_t> out,
                                         CodecScratch& /*scratch: none needed*/,
                                         const DeviceCall* device) const override {
    const uint64_t n = grad.size();
    FrameHeader h = HeaderFor(ValueType::kPacked, n, n, step, !residual.empty());
    h.quant_bits = static_cast<uint8_t>(bits_);
    h.bucket_size = spec_.bucket_size;
    h.scale_bytes = ScaleBytes(n);
    h.value_bytes = kernels::PackedBytes(n, bits_);
    absl::StatusOr<MutableFrameSections> sections = StartFrame(h, out);
    if (!sections.ok()) return sections.status();
    float* res = residual.empty() ? nullptr : residual.data();
    kernels::FusedStats fs;
    const absl::Span<uint8_t> outs[] = {sections->scales, sections->values};
    GRADWIRE_RETURN_IF_ERROR(codec_internal::RunEncodeKernel(
        device, outs, nullptr, 0, &fs,
        [&](absl::Span<uint8_t* const> o, void*, kernels::FusedStats* stats,
            kernels::cuda::Stream stream) {
          if (id_ == CodecId::kSign) {
            return kernels::SignCompress(grad.data(), res, n, spec_.bucket_size, o[0], o[1], stats,
                                         stream);
          }
          return kernels::QsgdCompress(grad.data(), res, n, bits_, spec_.bucket_size, spec_.seed,
                                       step, o[0], o[1], stats, stream);
        }));
    return codec_internal::SealWithStats(out, fs);
  }

 private:
  absl::Status CheckHeader(const ParsedFrame& frame, uint64_t n) const override {
    const FrameHeader& h = frame.header;
    GRADWIRE_RETURN_IF_ERROR(codec_internal::CheckFields(
        name(), {{"value_type", static_cast<uint64_t>(h.value_type),
                  static_cast<uint64_t>(ValueType::kPacked), "quantized codes are packed"},
                 {"index_encoding", static_cast<uint64_t>(h.index_encoding), 0,
                  "quantized frames carry no indices"},
                 {"quant_bits", h.quant_bits, bits_, "the spec's bits"},
                 {"bucket_size", h.bucket_size, spec_.bucket_size, "the spec's bucket"},
                 {"element_count", h.element_count, n, "one code per element"},
                 {"scale_bytes", h.scale_bytes, ScaleBytes(n), "one fp32 scale per bucket"},
                 {"value_bytes", h.value_bytes, kernels::PackedBytes(n, bits_),
                  "n codes of quant_bits each"}}));
    const uint8_t* scales = frame.sections.scales.data();
    const uint8_t* packed = frame.sections.values.data();
    const uint64_t buckets = kernels::BucketCount(n, spec_.bucket_size);
    for (uint64_t b = 0; b < buckets; ++b) {
      // An encoder only writes finite non-negative scales (max or mean of
      // finite magnitudes); anything else would spread NaN/Inf over a bucket.
      const float s = kernels::LoadValue(scales, b, kernels::ValueFormat::kFp32);
      if (!kernels::IsFinite(s) || (kernels::FloatBits(s) >> 31) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(name(), " frame: scale of bucket ", b,
                                                       " is ", s, ", expected finite and >= 0"));
      }
    }
    const uint32_t tail = static_cast<uint32_t>(n * bits_ % 8);
    if (tail != 0 && (packed[h.value_bytes - 1] >> tail) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), " frame: unused bits after the last code are not zero"));
    }
    return absl::OkStatus();
  }

  // Each decoded value is at most its bucket's scale in magnitude (QSGD
  // levels lie in [-1, 1], a sign decodes to +-scale), and fp32 rounding
  // is monotone, so the reference's running sum of bucket b after frame r
  // is bounded by the same running sum of the scales, in fp32 and in the
  // same order. Where that bound divided by `divisor` is finite the
  // average is; where it is not, frames whose values all sit at their
  // scale would make +-inf. Exact, and the same arithmetic as decoding.
  absl::Status CheckAverage(absl::Span<const ParsedFrame> frames, float divisor,
                            size_t* bad_frame) const override {
    if (frames.empty()) return absl::OkStatus();
    const uint64_t buckets = kernels::BucketCount(frames[0].header.dense_length, spec_.bucket_size);
    size_t first_bad = frames.size();
    uint64_t bad_bucket = 0;
    for (uint64_t b = 0; b < buckets; ++b) {
      float bound = 0.0f;
      for (size_t r = 0; r < first_bad; ++r) {
        bound +=
            kernels::LoadValue(frames[r].sections.scales.data(), b, kernels::ValueFormat::kFp32);
        if (!kernels::IsFinite(bound / divisor)) {
          first_bad = r;
          bad_bucket = b;
          break;
        }
      }
    }
    if (first_bad == frames.size()) return absl::OkStatus();
    *bad_frame = first_bad;
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " frame ", first_bad, ": the scales of bucket ", bad_bucket,
                     " over frames 0..", first_bad, ", divided by ", divisor,
                     ", overflow fp32: the average could overflow to infinity"));
  }

  absl::Status Apply(const ParsedFrame& parsed, uint64_t begin, absl::Span<float> dense,
                     kernels::cuda::Stream stream) const override {
    // begin starts a bucket and a byte of codes (ChunkQuantum).
    const uint8_t* scales = parsed.sections.scales.data() + 4 * (begin / spec_.bucket_size);
    const uint8_t* packed = parsed.sections.values.data() + begin * bits_ / 8;
    const uint64_t n = dense.size();
    if (id_ == CodecId::kSign) {
      return kernels::SignDecodeAccumulate(scales, packed, n, spec_.bucket_size, dense.data(),
                                           stream);
    }
    return kernels::QsgdDecodeAccumulate(scales, packed, n, bits_, spec_.bucket_size, dense.data(),
                                         stream);
  }

  absl::Status AverageOnHost(absl::Span<const ParsedFrame> frames, uint64_t begin, float divisor,
                             absl::Span<float> out) const override {
    // As Apply: begin starts a bucket and a byte of codes.
    absl::InlinedVector<const uint8_t*, 16> scales, packed;
    for (const ParsedFrame& f : frames) {
      scales.push_back(f.sections.scales.data() + 4 * (begin / spec_.bucket_size));
      packed.push_back(f.sections.values.data() + begin * bits_ / 8);
    }
    if (id_ == CodecId::kSign) {
      return kernels::SignDecodeAverage(scales, packed, out.size(), spec_.bucket_size, divisor,
                                        out.data());
    }
    return kernels::QsgdDecodeAverage(scales, packed, out.size(), bits_, spec_.bucket_size, divisor,
                                      out.data());
  }

  // Whole buckets, and whole bytes of codes: lcm(bucket_size, 8).
  uint64_t ChunkQuantum() const override {
    const uint64_t b = spec_.bucket_size;
    return b % 8 == 0 ? b : b % 4 == 0 ? 2 * b : b % 2 == 0 ? 4 * b : 8 * b;
  }

  uint64_t ScaleBytes(uint64_t n) const { return 4 * kernels::BucketCount(n, spec_.bucket_size); }

  uint32_t bits_;
};

}  // namespace

std::unique_ptr<Codec> NewQuantizedCodec(const CompressionSpec& spec) {
  return std::make_unique<QuantizedCodec>(spec);
}

}  // namespace gradwire
