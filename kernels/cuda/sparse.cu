#include <cuda_runtime.h>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/cuda/sparse.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kThreads)
    SparseDecodeKernel(const uint32_t* indices, const uint8_t* values, uint64_t k,
                       ValueFormat format, float* dense) {
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; j < k;
       j += static_cast<uint64_t>(gridDim.x) * kThreads) {
    dense[indices[j]] += LoadValue(values, j, format);
  }
}

}  // namespace

absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, Stream stream) {
  if (format != ValueFormat::kFp32 && format != ValueFormat::kFp16 &&
      format != ValueFormat::kBf16) {
    return absl::InvalidArgumentError("SparseDecodeAccumulate: unknown format");
  }
  if (k == 0) return absl::OkStatus();
  if (indices == nullptr || values == nullptr || dense == nullptr) {
    return absl::InvalidArgumentError("SparseDecodeAccumulate: null buffer");
  }
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(k, kThreads, 8, &grid));
  SparseDecodeKernel<<<grid, kThreads, 0, stream>>>(indices, values, k, format, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("SparseDecodeKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
