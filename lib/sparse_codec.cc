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

// Carves one CodecScratch buffer into the arrays a call needs, each
// 64-byte aligned: sizes first (Add), then one Get, then the pointers.
// The buffer is reused across calls, so after the first call of the
// largest size nothing is allocated.
class ScratchLayout {
 public:
  // Returns the array's offset; call before Place.
  size_t Add(uint64_t bytes) {
    const size_t at = total_;
    total_ += (bytes + 63) / 64 * 64;
    return at;
  }
  void Place(CodecScratch& scratch) { base_ = scratch.Get(total_ > 0 ? total_ : 64); }
  template <typename T>
  T* At(size_t offset) const {
    return reinterpret_cast<T*>(base_ + offset);
  }

 private:
  size_t total_ = 0;
  uint8_t* base_ = nullptr;
};

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

  absl::StatusOr<EncodeStats> EncodeWith(absl::Span<const float> grad, uint64_t step,
                                         absl::Span<float> residual, absl::Span<uint8_t> out,
                                         CodecScratch& scratch) const override {
    if (absl::Status s = codec_internal::CheckEncodeArgs(grad, residual, out.size(),
                                                         MaxEncodedBytes(grad.size()));
        !s.ok())
      return s;
    const uint64_t n = grad.size();
    const uint64_t k = spec_.SelectedCount(n);
    const uint64_t width = kernels::ValueWidth(format_);
    float* res = residual.empty() ? nullptr : residual.data();
    kernels::FusedStats fs;
    uint64_t temp_bytes = 0;
    RunKernel(nullptr, &temp_bytes, grad.data(), res, n, k, step, nullptr, nullptr, &fs);
    // The varint length is only known once encoded, and the header (which
    // StartFrame writes) holds it: indices and values are staged aside.
    const uint64_t index_cap = encoding_ != IndexEncoding::kNone ? MaxIndexBytes(encoding_, k) : 0;
    ScratchLayout layout;
    const size_t at_indices = layout.Add(k * sizeof(uint32_t));
    const size_t at_values = layout.Add(k * width);
    const size_t at_index_bytes = layout.Add(index_cap);
    const size_t at_temp = layout.Add(temp_bytes);
    layout.Place(scratch);
    uint32_t* indices = layout.At<uint32_t>(at_indices);
    uint8_t* values = layout.At<uint8_t>(at_values);
    uint8_t* index_bytes = layout.At<uint8_t>(at_index_bytes);
    RunKernel(layout.At<void>(at_temp), &temp_bytes, grad.data(), res, n, k, step, indices, values,
              &fs);

    size_t index_len = 0;
    if (encoding_ != IndexEncoding::kNone) {
      absl::StatusOr<size_t> len = EncodeIndices(encoding_, absl::MakeConstSpan(indices, k),
                                                 absl::MakeSpan(index_bytes, index_cap));
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
    if (index_len > 0) std::memcpy(sections->indices.data(), index_bytes, index_len);
    if (k > 0) std::memcpy(sections->values.data(), values, k * width);
    return codec_internal::SealWithStats(out, fs);
  }

  absl::Status DecodeAccumulateWith(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                    CodecScratch& scratch) const override {
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
    uint64_t temp_bytes = 0;
    if (id_ == CodecId::kRandomK) {
      kernels::cpu::RandomKIndices(nullptr, &temp_bytes, h.seed, h.step, n, k, nullptr);
    }
    ScratchLayout layout;
    const size_t at_indices = layout.Add(k * sizeof(uint32_t));
    const size_t at_temp = layout.Add(temp_bytes);
    layout.Place(scratch);
    uint32_t* indices = layout.At<uint32_t>(at_indices);
    if (id_ == CodecId::kRandomK) {
      kernels::cpu::RandomKIndices(layout.At<void>(at_temp), &temp_bytes, h.seed, h.step, n, k,
                                   indices);
    } else {
      absl::Status s =
          DecodeIndices(encoding_, parsed->sections.indices, n, absl::MakeSpan(indices, k));
      if (!s.ok()) return s;
    }
    // Everything is valid: only now touch `dense`.
    kernels::cpu::SparseDecodeAccumulate(indices, parsed->sections.values.data(), k, format_,
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
