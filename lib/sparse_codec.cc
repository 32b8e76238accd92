#include "gradwire/lib/sparse_codec.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gradwire/kernels/cpu/randomk.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/lib/codec_frame.h"

namespace gradwire {
namespace {

using codec_internal::FieldMismatch;

// Uninitialized scratch: value-initializing ~4n bytes of selection temp
// storage would cost a pass over memory the kernel mostly never touches.
template <typename T>
std::unique_ptr<T[]> Scratch(uint64_t count) {
  return std::unique_ptr<T[]>(new T[count > 0 ? count : 1]);
}

class SparseCodec : public Codec {
 public:
  explicit SparseCodec(const CompressionSpec& spec)
      : spec_(spec),
        format_(codec_internal::ToFormat(spec.values)),
        encoding_(spec.method == Method::kRandomK ? IndexEncoding::kNone : spec.indices) {
    switch (spec.method) {
      case Method::kApproxTopK:
        id_ = CodecId::kApproxTopK;
        break;
      case Method::kRandomK:
        id_ = CodecId::kRandomK;
        break;
      default:
        id_ = CodecId::kTopK;
        break;
    }
  }

  const CompressionSpec& spec() const override { return spec_; }

  size_t MaxEncodedBytes(uint64_t n) const override {
    const uint64_t k = spec_.SelectedCount(n);
    return kFrameHeaderBytes + kFrameChecksumBytes + MaxIndexBytes(encoding_, k) +
           k * kernels::ValueWidth(format_);
  }

  absl::StatusOr<EncodeStats> Encode(absl::Span<const float> grad, uint64_t step,
                                     absl::Span<float> residual,
                                     absl::Span<uint8_t> out) const override {
    if (absl::Status s = codec_internal::CheckEncodeArgs(grad, residual, out.size(),
                                                         MaxEncodedBytes(grad.size()));
        !s.ok())
      return s;
    const uint64_t n = grad.size();
    const uint64_t k = spec_.SelectedCount(n);
    const uint64_t width = kernels::ValueWidth(format_);
    float* res = residual.empty() ? nullptr : residual.data();
    auto indices = Scratch<uint32_t>(k);
    auto values = Scratch<uint8_t>(k * width);
    kernels::FusedStats fs;
    uint64_t temp_bytes = 0;
    RunKernel(nullptr, &temp_bytes, grad.data(), res, n, k, step, indices.get(), values.get(), &fs);
    auto temp = Scratch<uint64_t>(temp_bytes / 8 + 1);
    RunKernel(temp.get(), &temp_bytes, grad.data(), res, n, k, step, indices.get(), values.get(),
              &fs);

    // The varint length is only known once encoded, and the header (which
    // StartFrame writes) holds it: encode the indices aside first.
    std::unique_ptr<uint8_t[]> index_bytes;
    size_t index_len = 0;
    if (encoding_ != IndexEncoding::kNone) {
      const uint64_t cap = MaxIndexBytes(encoding_, k);
      index_bytes = Scratch<uint8_t>(cap);
      absl::StatusOr<size_t> len = EncodeIndices(encoding_, absl::MakeConstSpan(indices.get(), k),
                                                 absl::MakeSpan(index_bytes.get(), cap));
      if (!len.ok()) return len.status();
      index_len = *len;
    }
    FrameHeader h;
    h.codec = id_;
    h.value_type = spec_.values;
    h.index_encoding = encoding_;
    h.flags = res != nullptr ? kFlagErrorFeedback : 0;
    h.dense_length = n;
    h.element_count = k;
    h.step = step;
    h.seed = spec_.seed;
    h.index_bytes = index_len;
    h.value_bytes = k * width;
    absl::StatusOr<MutableFrameSections> sections = StartFrame(h, out);
    if (!sections.ok()) return sections.status();
    if (index_len > 0) std::memcpy(sections->indices.data(), index_bytes.get(), index_len);
    if (k > 0) std::memcpy(sections->values.data(), values.get(), k * width);
    absl::StatusOr<size_t> bytes = SealFrame(out);
    if (!bytes.ok()) return bytes.status();
    EncodeStats stats;
    stats.frame_bytes = *bytes;
    stats.selected = fs.selected;
    stats.nonfinite = fs.nonfinite;
    return stats;
  }

  absl::Status DecodeAccumulate(absl::Span<const uint8_t> frame,
                                absl::Span<float> dense) const override {
    const uint64_t n = dense.size();
    absl::StatusOr<ParsedFrame> parsed = codec_internal::ParseFrameFor(frame, id_, n);
    if (!parsed.ok()) return parsed.status();
    const FrameHeader& h = parsed->header;
    const absl::string_view name = MethodName(spec_.method);
    const uint64_t k = spec_.SelectedCount(n);
    const uint64_t width = kernels::ValueWidth(format_);
    if (h.value_type != spec_.values) {
      return FieldMismatch(name, "value_type", static_cast<uint64_t>(h.value_type),
                           static_cast<uint64_t>(spec_.values), "the spec's values= setting");
    }
    if (h.index_encoding != encoding_) {
      return FieldMismatch(name, "index_encoding", static_cast<uint64_t>(h.index_encoding),
                           static_cast<uint64_t>(encoding_), "the spec's indices= setting");
    }
    if (h.bucket_size != 0) return FieldMismatch(name, "bucket_size", h.bucket_size, 0, "unused");
    if (h.element_count != k) {
      return FieldMismatch(name, "element_count", h.element_count, k,
                           "k = round(ratio * n) for this spec's ratio");
    }
    if (h.scale_bytes != 0)
      return FieldMismatch(name, "scale_bytes", h.scale_bytes, 0, "no scales");
    if (h.value_bytes != k * width) {
      return FieldMismatch(name, "value_bytes", h.value_bytes, k * width, "k values");
    }
    if (id_ == CodecId::kRandomK && h.seed != spec_.seed) {
      return FieldMismatch(name, "seed", h.seed, spec_.seed,
                           "random-k indices derive from the shared seed");
    }
    auto indices = Scratch<uint32_t>(k);
    if (id_ == CodecId::kRandomK) {
      uint64_t temp_bytes = 0;
      kernels::cpu::RandomKIndices(nullptr, &temp_bytes, h.seed, h.step, n, k, nullptr);
      auto temp = Scratch<uint64_t>(temp_bytes / 8 + 1);
      kernels::cpu::RandomKIndices(temp.get(), &temp_bytes, h.seed, h.step, n, k, indices.get());
    } else {
      absl::Status s =
          DecodeIndices(encoding_, parsed->sections.indices, n, absl::MakeSpan(indices.get(), k));
      if (!s.ok()) return s;
    }
    // Everything is valid: only now touch `dense`.
    kernels::cpu::SparseDecodeAccumulate(indices.get(), parsed->sections.values.data(), k, format_,
                                         dense.data());
    return absl::OkStatus();
  }

 private:
  void RunKernel(void* temp, uint64_t* temp_bytes, const float* grad, float* res, uint64_t n,
                 uint64_t k, uint64_t step, uint32_t* indices, uint8_t* values,
                 kernels::FusedStats* fs) const {
    switch (id_) {
      case CodecId::kApproxTopK:
        kernels::cpu::ApproxTopKCompress(temp, temp_bytes, grad, res, n, k, format_, indices,
                                         values, fs, nullptr);
        break;
      case CodecId::kRandomK:
        kernels::cpu::RandomKCompress(temp, temp_bytes, grad, res, n, k, spec_.seed, step, format_,
                                      indices, values, fs);
        break;
      default:
        kernels::cpu::TopKCompress(temp, temp_bytes, grad, res, n, k, format_, indices, values, fs);
        break;
    }
  }

  CompressionSpec spec_;
  kernels::ValueFormat format_;
  IndexEncoding encoding_;
  CodecId id_;
};

}  // namespace

std::unique_ptr<Codec> NewSparseCodec(const CompressionSpec& spec) {
  return std::make_unique<SparseCodec>(spec);
}

}  // namespace gradwire
