#include "gradwire/kernels/cuda/radix_select.cuh"
#include "gradwire/kernels/cuda/topk.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

using radix::Levels;
using radix::OutputSpec;

absl::Status FloatTopK(const char* who, const Levels& levels, void* temp, uint64_t* temp_bytes,
                       const float* grad, float* residual, uint64_t n, uint64_t k,
                       ValueFormat format, uint32_t* indices, uint8_t* values, FusedStats* stats,
                       ApproxTopKBand* band, Stream stream) {
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      radix::QueryOrCheck(who, temp, temp_bytes, n, levels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(radix::CheckShape(who, n, k, format, grad, indices, values));
  // After level 0 the keys come from the stored acc (the residual buffer
  // with error feedback, else the gradient itself).
  const radix::MagnitudeSource src{residual != nullptr ? residual : grad};
  const radix::FloatLoader<radix::MagnitudeOfAcc> load{grad, residual, {}};
  return radix::RunSelection(temp, levels, src, load, n, k,
                             OutputSpec{indices, values, format, residual}, stats, band, stream);
}

}  // namespace

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, Stream stream) {
  return FloatTopK("TopKCompress", radix::kMagnitudeLevels, temp, temp_bytes, grad, residual, n, k,
                   format, indices, values, stats, nullptr, stream);
}

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, Stream stream) {
  return FloatTopK("ApproxTopKCompress", radix::kApproxLevels, temp, temp_bytes, grad, residual, n,
                   k, format, indices, values, stats, band, stream);
}

absl::Status TopKCompress16(void* temp, uint64_t* temp_bytes, const uint16_t* grad,
                            ValueFormat grad_format, uint64_t n, uint64_t k, ValueFormat format,
                            uint32_t* indices, uint8_t* values, FusedStats* stats, Stream stream) {
  const char* who = "TopKCompress16";
  if (grad_format != ValueFormat::kFp16 && grad_format != ValueFormat::kBf16) {
    return absl::InvalidArgumentError("TopKCompress16: grad_format must be fp16 or bf16");
  }
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      radix::QueryOrCheck(who, temp, temp_bytes, n, radix::kHalfLevels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(radix::CheckShape(who, n, k, format, grad, indices, values));
  const bool bf16 = grad_format == ValueFormat::kBf16;
  return radix::RunSelection(temp, radix::kHalfLevels, radix::Half16Source{grad, bf16},
                             radix::Half16Loader{grad, bf16}, n, k,
                             OutputSpec{indices, values, format, nullptr}, stats, nullptr, stream);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
