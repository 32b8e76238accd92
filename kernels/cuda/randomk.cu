#include "gradwire/kernels/cuda/radix_select.cuh"
#include "gradwire/kernels/cuda/randomk.h"

namespace gradwire {
namespace kernels {
namespace cuda {

absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices, Stream stream) {
  const char* who = "RandomKIndices";
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      radix::QueryOrCheck(who, temp, temp_bytes, n, radix::kFullLevels, &query_only));
  if (query_only) return absl::OkStatus();
  if (k > n) return absl::InvalidArgumentError("RandomKIndices: k > n");
  if (n > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("RandomKIndices: n > 2^32 (u32 indices)");
  }
  if (k > 0 && indices == nullptr) {
    return absl::InvalidArgumentError("RandomKIndices: indices is null");
  }
  const ElementKey key = RandomKElementKey(seed, step, n);
  return radix::RunSelection(temp, radix::kFullLevels, radix::RandomSource{key, nullptr},
                             radix::IndexOnlyLoader{key}, n, k,
                             radix::OutputSpec{indices, nullptr, ValueFormat::kFp32, nullptr},
                             nullptr, nullptr, stream);
}

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, Stream stream) {
  const char* who = "RandomKCompress";
  bool query_only = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      radix::QueryOrCheck(who, temp, temp_bytes, n, radix::kFullLevels, &query_only));
  if (query_only) return absl::OkStatus();
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      radix::CheckShape(who, n, k, format, grad, indices, values, /*indices_optional=*/true));
  const ElementKey key = RandomKElementKey(seed, step, n);
  const radix::RandomSource src{key, residual != nullptr ? residual : grad};
  const radix::FloatLoader<radix::RandomOfIndex> load{grad, residual, {key}};
  return radix::RunSelection(temp, radix::kFullLevels, src, load, n, k,
                             radix::OutputSpec{indices, values, format, residual}, stats, nullptr,
                             stream);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
