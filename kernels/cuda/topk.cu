#include "gradwire/kernels/cuda/topk.h"

#include "gradwire/kernels/cuda/radix_select.cuh"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

using radix::Levels;
using radix::OutputSpec;

absl::Status CheckShape(const char* who, uint64_t n, uint64_t k, const void* grad, const uint32_t* indices,
                        const uint8_t* values) {
  if (k > n) return absl::InvalidArgumentError(std::string(who) + ": k > n");
  if (n > (uint64_t{1} << 32)) return absl::InvalidArgumentError(std::string(who) + ": n > 2^32 (u32 indices)");
  if (n > 0 && grad == nullptr) return absl::InvalidArgumentError(std::string(who) + ": grad is null");
  if (k > 0 && (indices == nullptr || values == nullptr)) {
    return absl::InvalidArgumentError(std::string(who) + ": indices or values is null");
  }
  return absl::OkStatus();
}

// The temp-storage query, then the size check.
template <typename Source>
absl::Status QueryOrCheck(const char* who, void* temp, uint64_t* temp_bytes, uint64_t n, const Levels& levels,
                          bool* query_only) {
  if (temp_bytes == nullptr) return absl::InvalidArgumentError(std::string(who) + ": temp_bytes is null");
  radix::Layout layout;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(radix::LayoutFor<Source>(n, levels, &layout));
  *query_only = temp == nullptr;
  if (*query_only) {
    *temp_bytes = layout.total;
    return absl::OkStatus();
  }
  if (*temp_bytes < layout.total) return absl::InvalidArgumentError(std::string(who) + ": temp storage too small");
  return absl::OkStatus();
}

absl::Status FloatTopK(const char* who, const Levels& levels, void* temp, uint64_t* temp_bytes,
                       const float* grad, float* residual, uint64_t n, uint64_t k, ValueFormat format,
                       uint32_t* indices, uint8_t* values, FusedStats* stats, cpu::ApproxTopKBand* band,
                       Stream stream) {
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      QueryOrCheck<radix::MagnitudeSource>(who, temp, temp_bytes, n, levels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckShape(who, n, k, grad, indices, values));
  // After level 0 the keys come from the stored acc (the residual buffer
  // with error feedback, else the gradient itself).
  radix::MagnitudeSource src{residual != nullptr ? residual : grad};
  return radix::RunSelection(temp, levels, src, radix::FloatLoader{grad, residual}, radix::MagnitudeOfAcc{}, n,
                             k, OutputSpec{indices, values, format, residual}, stats, band, stream);
}

}  // namespace

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual, uint64_t n,
                          uint64_t k, ValueFormat format, uint32_t* indices, uint8_t* values, FusedStats* stats,
                          Stream stream) {
  return FloatTopK("TopKCompress", radix::kMagnitudeLevels, temp, temp_bytes, grad, residual, n, k, format,
                   indices, values, stats, nullptr, stream);
}

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                                uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices, uint8_t* values,
                                FusedStats* stats, cpu::ApproxTopKBand* band, Stream stream) {
  return FloatTopK("ApproxTopKCompress", radix::kApproxLevels, temp, temp_bytes, grad, residual, n, k, format,
                   indices, values, stats, band, stream);
}

absl::Status TopKCompress16(void* temp, uint64_t* temp_bytes, const uint16_t* grad, ValueFormat grad_format,
                            uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices, uint8_t* values,
                            FusedStats* stats, Stream stream) {
  const char* who = "TopKCompress16";
  if (grad_format != ValueFormat::kFp16 && grad_format != ValueFormat::kBf16) {
    return absl::InvalidArgumentError("TopKCompress16: grad_format must be fp16 or bf16");
  }
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      QueryOrCheck<radix::Half16Source>(who, temp, temp_bytes, n, radix::kHalfLevels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckShape(who, n, k, grad, indices, values));
  radix::Half16Source src{grad, grad_format == ValueFormat::kBf16};
  return radix::RunSelection(temp, radix::kHalfLevels, src, radix::Half16Loader{src}, radix::Half16KeyOfIndex{src},
                             n, k, OutputSpec{indices, values, format, nullptr}, stats, nullptr, stream);
}

absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                            uint64_t k, uint32_t* indices, Stream stream) {
  const char* who = "RandomKIndices";
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      QueryOrCheck<radix::RandomSource>(who, temp, temp_bytes, n, radix::kFullLevels, &query_only));
  if (query_only) return absl::OkStatus();
  if (k > n) return absl::InvalidArgumentError("RandomKIndices: k > n");
  if (n > (uint64_t{1} << 32)) return absl::InvalidArgumentError("RandomKIndices: n > 2^32 (u32 indices)");
  if (k > 0 && indices == nullptr) return absl::InvalidArgumentError("RandomKIndices: indices is null");
  const uint64_t key = StreamKey(seed, step, kStreamRandomK);
  radix::RandomSource src{key, nullptr};
  return radix::RunSelection(temp, radix::kFullLevels, src, radix::NoLoad{}, radix::RandomOfIndex{key}, n, k,
                             OutputSpec{indices, nullptr, ValueFormat::kFp32, nullptr}, nullptr, nullptr,
                             stream);
}

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual, uint64_t n,
                             uint64_t k, uint64_t seed, uint64_t step, ValueFormat format, uint32_t* indices,
                             uint8_t* values, FusedStats* stats, Stream stream) {
  const char* who = "RandomKCompress";
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      QueryOrCheck<radix::RandomSource>(who, temp, temp_bytes, n, radix::kFullLevels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckShape(who, n, k, grad, indices, values));
  const uint64_t key = StreamKey(seed, step, kStreamRandomK);
  radix::RandomSource src{key, residual != nullptr ? residual : grad};
  return radix::RunSelection(temp, radix::kFullLevels, src, radix::FloatLoader{grad, residual},
                             radix::RandomOfIndex{key}, n, k, OutputSpec{indices, values, format, residual},
                             stats, nullptr, stream);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
