#include <cuda_runtime.h>

#include <string>

#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

__global__ void __launch_bounds__(kThreads)
    CastKernel(const float* __restrict__ grad, float* __restrict__ residual, uint64_t n,
               ValueFormat format, uint8_t* __restrict__ values, FusedStats* stats) {
  uint32_t nonfinite = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
    nonfinite += IsFinite(a) ? 0u : 1u;
    StoreValue(values, i, a, format);
    if (residual != nullptr) residual[i] = ResidualAfter(a, RoundToFormat(a, format));
  }
  WriteSelected(stats, n);
  AddBlockCount(NonFiniteCounter(stats), nonfinite);
}

__global__ void __launch_bounds__(kThreads)
    CastDecodeKernel(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    dense[i] += LoadValue(values, i, format);
  }
}

bool KnownFormat(ValueFormat f) {
  return f == ValueFormat::kFp32 || f == ValueFormat::kFp16 || f == ValueFormat::kBf16;
}

}  // namespace

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, Stream stream) {
  if (!KnownFormat(format)) return absl::InvalidArgumentError("CastCompress: unknown format");
  if (n > 0 && (grad == nullptr || values == nullptr)) {
    return absl::InvalidArgumentError("CastCompress: null buffer");
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ZeroStats(stats, stream));
  if (n == 0) return absl::OkStatus();
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(n, kThreads, 8, &grid));
  CastKernel<<<grid, kThreads, 0, stream>>>(grad, residual, n, format, values, stats);
  GRADWIRE_CUDA_CHECK_LAUNCH("CastKernel");
  return absl::OkStatus();
}

absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, Stream stream) {
  if (!KnownFormat(format)) {
    return absl::InvalidArgumentError("CastDecodeAccumulate: unknown format");
  }
  if (n == 0) return absl::OkStatus();
  if (values == nullptr || dense == nullptr) {
    return absl::InvalidArgumentError("CastDecodeAccumulate: null buffer");
  }
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(n, kThreads, 8, &grid));
  CastDecodeKernel<<<grid, kThreads, 0, stream>>>(values, n, format, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("CastDecodeKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
