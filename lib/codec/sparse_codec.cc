#include "gradwire/lib/codec/sparse_codec.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/internal/codec_base.h"
#include "gradwire/lib/codec/internal/codec_frame.h"
#include "gradwire/lib/codec/internal/device_staging.h"

namespace gradwire {
namespace {

using codec_internal::FieldMismatch;

// The host decodes every frame's index list whole, once, and averages
// over the lists when they are sparse (k <= n / kWholeListsMinSpacing)
// and take at most this many bytes (p frames * k u32s); else
// AverageAsDecoded (a checking scan, then a second decode, but no lists
// written and read back). Four frames on an Intel guest, against the way
// before AverageAsDecoded (each range's indices decoded into a small
// list, then added): at 25.6M elements lists faster at 0.1-2 % (0.4-8 MB
// of lists, by 0.2-0.9 ms), the ranges at 5 and 10 % (20 and 41 MB, by
// 1.5-2.3 ms); at 1M elements lists faster at 2 %, even at 5 %, slower
// at 10 % (0.98 against 1.08 ms): docs/results/2026-12-05-list-or-ranges.md.
// AverageAsDecoded itself, forced, on a Zen 3 guest (top-k, one round):
// slower than the lists at 0.1 % (0.38 against 0.26 ms at 1M, 10.6
// against 4.9 at 25.6M) and at 1 % about even at 1M (0.37 against 0.38),
// slower at 25.6M (10.7 against 9.1): docs/results/2026-12-06-varint-average.md.
constexpr uint64_t kWholeListsMaxBytes = uint64_t{8} << 20;
constexpr uint64_t kWholeListsMinSpacing = 16;
codec_internal::HostAverageWay host_average_way =
    codec_internal::HostAverageWay::kChosen;  // tests may force one

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

class SparseCodec : public codec_internal::CodecBase {
 public:
  explicit SparseCodec(const CompressionSpec& spec)
      : CodecBase(spec),
        format_(codec_internal::ToFormat(spec.values)),
        encoding_(spec.method == Method::kRandomK ? IndexEncoding::kNone : spec.indices) {}

  size_t MaxEncodedBytes(uint64_t n) const override {
    const uint64_t k = spec_.SelectedCount(n);
    return kFrameHeaderBytes + kFrameChecksumBytes + MaxIndexBytes(encoding_, k) +
           k * kernels::ValueWidth(format_);
  }

  absl::StatusOr<EncodeStats> EncodeWith(absl::Span<const float> grad, uint64_t step,
                                         absl::Span<float> residual, absl::Span<uint8_t> out,
                                         CodecScratch& scratch,
                                         const DeviceCall* device) const override {
    const uint64_t n = grad.size();
    const uint64_t k = spec_.SelectedCount(n);
    const uint64_t width = kernels::ValueWidth(format_);
    float* res = residual.empty() ? nullptr : residual.data();
    kernels::FusedStats fs;
    uint64_t temp_bytes = 0;
    GRADWIRE_RETURN_IF_ERROR(
        RunKernel(nullptr, &temp_bytes, grad.data(), res, n, k, step, nullptr, nullptr, &fs));
    FrameHeader h = HeaderFor(spec_.values, n, k, step, res != nullptr);
    h.index_encoding = encoding_;
    h.value_bytes = k * width;
    // Random-k frames carry no indices: the header is known now and the
    // values go straight into the frame (the host writes no indices, the
    // device keeps them in its scratch). Top-k's header holds the coded
    // index section's length, and the values follow that section: its
    // indices and values are coded into the frame once the kernel is done.
    // On the host they stay where the kernel's emit compacts its
    // candidates, inside its temp (TopKHostOutputsInTemp), rather than be
    // written to scratch lines no cache holds; the device's come back into
    // the scratch.
    const bool coded = encoding_ != IndexEncoding::kNone;
    const bool staged = coded && device != nullptr;
    ScratchLayout layout;
    const size_t at_indices = layout.Add(staged ? k * sizeof(uint32_t) : 0);
    const size_t at_values = layout.Add(staged ? k * width : 0);
    const size_t at_temp = layout.Add(device == nullptr ? temp_bytes : 0);  // device: its own
    layout.Place(scratch);
    uint32_t* indices = nullptr;
    absl::Span<uint8_t> values;  // where the kernel writes them
    if (staged) {
      indices = layout.At<uint32_t>(at_indices);
      values = absl::MakeSpan(layout.At<uint8_t>(at_values), k * width);
    } else if (coded) {
      const kernels::OutputsInTemp there =
          kernels::TopKHostOutputsInTemp(layout.At<void>(at_temp), n);
      indices = there.indices;
      values = absl::MakeSpan(there.values, k * width);
    } else {
      GRADWIRE_ASSIGN_OR_RETURN(const MutableFrameSections sections, StartFrame(h, out));
      values = sections.values;
    }
    // On the device only the values and (top-k) the k indices come back.
    const absl::Span<uint8_t> outs[] = {
        absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(indices), k * sizeof(uint32_t)), values};
    GRADWIRE_RETURN_IF_ERROR(codec_internal::RunEncodeKernel(
        device, outs, layout.At<void>(at_temp), temp_bytes, &fs,
        [&](absl::Span<uint8_t* const> o, void* temp, kernels::FusedStats* stats,
            kernels::cuda::Stream stream) {
          uint64_t bytes = temp_bytes;
          return RunKernel(temp, &bytes, grad.data(), res, n, k, step,
                           reinterpret_cast<uint32_t*>(o[0]), o[1], stats, stream);
        }));
    if (coded) {
      // The index section starts right behind the header (sparse frames
      // have no scales), and `out` holds MaxEncodedBytes(n): the indices
      // are coded in place, and the header written in front of them.
      const absl::Span<uint8_t> index_section =
          out.subspan(kFrameHeaderBytes, MaxIndexBytes(encoding_, k));
      GRADWIRE_ASSIGN_OR_RETURN(
          h.index_bytes, EncodeIndices(encoding_, absl::MakeConstSpan(indices, k), index_section));
      GRADWIRE_ASSIGN_OR_RETURN(const MutableFrameSections sections, StartFrame(h, out));
      if (sections.indices.data() != index_section.data()) {
        return absl::InternalError("the index section is not right behind the header");
      }
      if (k > 0) std::memcpy(sections.values.data(), values.data(), k * width);
    }
    return codec_internal::SealWithStats(out, fs);
  }

  absl::Status DecodeAccumulateWith(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                    CodecScratch& scratch,
                                    const DeviceCall* device) const override {
    const uint64_t n = dense.size();
    absl::StatusOr<ParsedFrame> parsed = CheckFrame(frame, n);
    if (!parsed.ok()) return parsed.status();
    const uint64_t k = spec_.SelectedCount(n);
    ScratchLayout layout;
    const size_t at_indices = layout.Add(k * sizeof(uint32_t));
    const size_t at_temp = layout.Add(RandomKTempBytes(n, k));
    layout.Place(scratch);
    uint32_t* indices = layout.At<uint32_t>(at_indices);
    if (absl::Status s = DecodeFrameIndices(*parsed, n, k, layout.At<void>(at_temp), indices);
        !s.ok())
      return s;
    // Everything is valid: only now touch `dense`.
    const absl::Span<const uint8_t> ins[] = {
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(indices), k * sizeof(uint32_t)),
        parsed->sections.values};
    return codec_internal::RunDecodeKernel(
        device, ins, [&](absl::Span<const uint8_t* const> at, kernels::cuda::Stream stream) {
          return kernels::SparseDecodeAccumulate(reinterpret_cast<const uint32_t*>(at[0]), at[1], k,
                                                 format_, dense.data(), stream);
        });
  }

  // The sum lives in `out`: once every frame is valid, SparseAverage
  // zeroes it, adds every frame and divides each touched element once (the
  // others are 0 / divisor = +0 already), chunk by chunk in cache.
  absl::Status DecodeAverageWith(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                                 absl::Span<float> out, CodecScratch& scratch, size_t* bad_frame,
                                 const DeviceCall* device,
                                 FrameIntegrity integrity) const override {
    const uint64_t n = out.size();
    const uint64_t k = spec_.SelectedCount(n);
    const size_t p = frames.size();
    if (device == nullptr && encoding_ == IndexEncoding::kDeltaVarint &&
        AveragesAsDecoded(p, k, n)) {
      return AverageAsDecoded(frames, divisor, out, bad_frame, integrity);
    }
    // The scratch: p index lists (unless random-k's one-pass average runs)
    // and random-k's bitmap. Placed before the frames are checked, except
    // for random-k, whose check touches no scratch and whose need is known
    // only once the frames' steps are.
    ScratchLayout layout;
    size_t at_indices = 0, at_temp = 0;
    auto place = [&](bool lists) {
      at_indices = layout.Add(lists ? p * k * sizeof(uint32_t) : 0);
      at_temp = layout.Add(RandomKTempBytes(n, k));
      layout.Place(scratch);
    };
    absl::InlinedVector<ParsedFrame, 16> parsed;
    absl::InlinedVector<const uint32_t*, 16> indices;
    parsed.reserve(p);
    indices.reserve(p);
    // Frame r's indices into its list; a random-k frame of the step before
    // it shares that frame's list.
    auto decode_indices = [&](size_t r) -> absl::Status {
      if (id_ == CodecId::kRandomK && r > 0 && parsed[r].header.step == parsed[r - 1].header.step) {
        indices.push_back(indices[r - 1]);
        return absl::OkStatus();
      }
      uint32_t* mine = layout.At<uint32_t>(at_indices) + r * k;
      if (absl::Status s = DecodeFrameIndices(parsed[r], n, k, layout.At<void>(at_temp), mine);
          !s.ok()) {
        *bad_frame = r;
        return s;
      }
      indices.push_back(mine);
      return absl::OkStatus();
    };
    if (id_ != CodecId::kRandomK) place(/*lists=*/true);
    // Validate everything first; `out` is not written until all frames pass.
    for (size_t r = 0; r < p; ++r) {
      absl::StatusOr<ParsedFrame> f = CheckFrame(frames[r], n, integrity);
      if (!f.ok()) {
        *bad_frame = r;
        return f.status();
      }
      parsed.push_back(*std::move(f));
      if (id_ != CodecId::kRandomK) GRADWIRE_RETURN_IF_ERROR(decode_indices(r));
    }
    if (id_ == CodecId::kRandomK) {
      bool one_step = true;
      for (size_t r = 1; r < p; ++r) one_step &= parsed[r].header.step == parsed[0].header.step;
      const bool one_pass = device == nullptr && one_step && p > 0;
      place(/*lists=*/!one_pass);
      if (one_pass) {
        // On the host, frames of one step: the indices are derived as out
        // is written, in one pass, never stored.
        absl::InlinedVector<const uint8_t*, 16> values;
        for (const ParsedFrame& f : parsed) values.push_back(f.sections.values.data());
        uint64_t temp_bytes = RandomKTempBytes(n, k);
        return kernels::RandomKDecodeAverage(layout.At<void>(at_temp), &temp_bytes, spec_.seed,
                                             parsed[0].header.step, n, k, values, format_, divisor,
                                             out.data());
      }
      for (size_t r = 0; r < p; ++r) GRADWIRE_RETURN_IF_ERROR(decode_indices(r));
    }
    absl::InlinedVector<absl::Span<const uint8_t>, 32> ins;
    for (size_t r = 0; r < p; ++r) {
      ins.push_back(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(indices[r]), k * sizeof(uint32_t)));
      ins.push_back(parsed[r].sections.values);
    }
    absl::InlinedVector<kernels::SparsePayload, 16> payloads(p);
    return codec_internal::RunDecodeKernel(
        device, ins, [&](absl::Span<const uint8_t* const> at, kernels::cuda::Stream stream) {
          for (size_t r = 0; r < p; ++r) {
            payloads[r] = {reinterpret_cast<const uint32_t*>(at[2 * r]), at[2 * r + 1], k, format_};
          }
          return kernels::SparseAverage(payloads, divisor, out, stream);
        });
  }

 private:
  // The header checks; the indices are checked as they are decoded.
  absl::Status CheckHeader(const ParsedFrame& frame, uint64_t n) const override {
    const FrameHeader& h = frame.header;
    const uint64_t k = spec_.SelectedCount(n);
    const uint64_t width = kernels::ValueWidth(format_);
    GRADWIRE_RETURN_IF_ERROR(codec_internal::CheckFields(
        name(),
        {{"value_type", static_cast<uint64_t>(h.value_type), static_cast<uint64_t>(spec_.values),
          "the spec's values= setting"},
         {"index_encoding", static_cast<uint64_t>(h.index_encoding),
          static_cast<uint64_t>(encoding_), "the spec's indices= setting"},
         {"bucket_size", h.bucket_size, 0, "unused"},
         {"element_count", h.element_count, k, "k = round(ratio * n) for this spec's ratio"},
         {"scale_bytes", h.scale_bytes, 0, "no scales"},
         {"value_bytes", h.value_bytes, k * width, "k values"}}));
    if (id_ == CodecId::kRandomK && h.seed != spec_.seed) {
      return FieldMismatch(name(), "seed", h.seed, spec_.seed,
                           "random-k indices derive from the shared seed");
    }
    return absl::OkStatus();
  }

  // Whether the host averages p delta-varint frames of k indices over n
  // elements as it decodes them (AverageAsDecoded; else over whole lists).
  static bool AveragesAsDecoded(size_t p, uint64_t k, uint64_t n) {
    switch (host_average_way) {
      case codec_internal::HostAverageWay::kWholeLists:
        return false;
      case codec_internal::HostAverageWay::kAsDecoded:
        return true;
      case codec_internal::HostAverageWay::kChosen:
        break;
    }
    return p * k * sizeof(uint32_t) > kWholeListsMaxBytes || k * kWholeListsMinSpacing > n;
  }

  // DecodeAverageWith on the host for delta-varint indices whose lists
  // would be large or dense (AveragesAsDecoded), without the frames'
  // index lists in memory (p * k u32s, 41 MB for four frames of ResNet-50
  // at 10 %, written and read back): each frame is checked first, its
  // index section by a scan that keeps nothing (CheckDeltaVarintIndices),
  // and once all pass, `out` is averaged by kernels::DeltaVarintAverage,
  // which decodes each frame's indices as it adds its values. The same
  // bits as SparseAverage over whole lists.
  absl::Status AverageAsDecoded(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                                absl::Span<float> out, size_t* bad_frame,
                                FrameIntegrity integrity) const {
    const uint64_t n = out.size();
    const uint64_t k = spec_.SelectedCount(n);
    const size_t p = frames.size();
    absl::InlinedVector<kernels::DeltaVarintPayload, 16> payloads;
    payloads.reserve(p);
    for (size_t r = 0; r < p; ++r) {
      absl::StatusOr<ParsedFrame> f = CheckFrame(frames[r], n, integrity);
      absl::Status s = f.status();
      if (s.ok()) {
        s = CheckDeltaVarintIndices(f->sections.indices, k, n);
      }
      if (!s.ok()) {
        *bad_frame = r;
        return s;
      }
      payloads.push_back({f->sections.indices.data(), f->sections.indices.size(),
                          f->sections.values.data(), k, format_});
    }
    // Every frame is valid: only now touch `out`.
    return kernels::DeltaVarintAverage(payloads, divisor, out);
  }

  uint64_t RandomKTempBytes(uint64_t n, uint64_t k) const {
    uint64_t temp_bytes = 0;
    if (id_ == CodecId::kRandomK) {
      // The size query: checks only what a valid spec satisfies.
      kernels::RandomKIndices(nullptr, &temp_bytes, spec_.seed, 0, n, k, nullptr).IgnoreError();
    }
    return temp_bytes;
  }

  // The frame's k indices into `indices`: decoded and checked (< n,
  // strictly increasing, exact consumption), or derived from seed and step
  // for random-k. `temp`: RandomKTempBytes(n, k) bytes.
  absl::Status DecodeFrameIndices(const ParsedFrame& parsed, uint64_t n, uint64_t k, void* temp,
                                  uint32_t* indices) const {
    if (id_ == CodecId::kRandomK) {
      uint64_t temp_bytes = RandomKTempBytes(n, k);
      return kernels::RandomKIndices(temp, &temp_bytes, parsed.header.seed, parsed.header.step, n,
                                     k, indices);
    }
    return DecodeIndices(encoding_, parsed.sections.indices, n, absl::MakeSpan(indices, k));
  }

  // temp == nullptr: the size query (either side's need, kernels/dispatch.h).
  absl::Status RunKernel(void* temp, uint64_t* temp_bytes, const float* grad, float* res,
                         uint64_t n, uint64_t k, uint64_t step, uint32_t* indices, uint8_t* values,
                         kernels::FusedStats* fs, kernels::cuda::Stream stream = nullptr) const {
    switch (id_) {
      case CodecId::kApproxTopK:
        return kernels::ApproxTopKCompress(temp, temp_bytes, grad, res, n, k, format_, indices,
                                           values, fs, nullptr, stream);
      case CodecId::kRandomK:
        return kernels::RandomKCompress(temp, temp_bytes, grad, res, n, k, spec_.seed, step,
                                        format_, indices, values, fs, stream);
      default:
        return kernels::TopKCompress(temp, temp_bytes, grad, res, n, k, format_, indices, values,
                                     fs, stream);
    }
  }

  kernels::ValueFormat format_;
  IndexEncoding encoding_;
};

}  // namespace

std::unique_ptr<Codec> NewSparseCodec(const CompressionSpec& spec) {
  return std::make_unique<SparseCodec>(spec);
}

namespace codec_internal {

HostAverageWay SetHostAverageWayForTesting(HostAverageWay way) {
  const HostAverageWay before = host_average_way;
  host_average_way = way;
  return before;
}

}  // namespace codec_internal

}  // namespace gradwire
