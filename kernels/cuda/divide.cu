#include "gradwire/kernels/cuda/divide.h"

#include <cuda_runtime.h>

#include "gradwire/kernels/cuda/cuda_status.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

__global__ void DivideKernel(float* values, uint64_t n, float divisor) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    values[i] = __fdiv_rn(values[i], divisor);
  }
}

}  // namespace

absl::Status DivideAll(float* values, uint64_t n, float divisor, Stream stream) {
  if (n == 0) return absl::OkStatus();
  const uint64_t blocks = (n + 255) / 256;
  DivideKernel<<<static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(
      values, n, divisor);
  GRADWIRE_CUDA_CHECK_LAUNCH("DivideKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
