#include <cuda_runtime.h>

#include <algorithm>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/cuda/quantized_sum.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/validate.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

using QuantizedList = PayloadBatch<QuantizedPayload>;

template <bool kSign>
__global__ void __launch_bounds__(kThreads)
    QuantizedSumKernel(const QuantizedList workers, uint32_t bits, uint32_t bucket,
                       float* __restrict__ dense, uint64_t n, bool accumulate, float scale) {
  const uint32_t max_code = QsgdMaxCode(bits);
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    float acc = accumulate ? dense[i] : 0.0f;
    const uint64_t b = i / bucket;
    for (int w = 0; w < workers.count; ++w) {
      const float s = LoadValue(workers.p[w].scales, b, ValueFormat::kFp32);
      const uint32_t code = ReadPackedCode(workers.p[w].packed, i, bits);
      acc += kSign ? SignDecode(code, s) : QsgdDequantize(code, s, max_code);
    }
    dense[i] = acc * scale;
  }
}

}  // namespace

absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads,
                                 const QuantizedFormat& format, float* dense, uint64_t n,
                                 const SparseSumOptions& options, Stream stream) {
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ValidateQuantizedSum(payloads, format, n));
  if (n == 0) return absl::OkStatus();
  if (dense == nullptr) return absl::InvalidArgumentError("QuantizedSumToDense: dense is null");
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(n, kThreads, 8, &grid));
  return ForEachBatch(payloads, [&](const QuantizedList& batch, bool first, bool last) {
    const bool acc = first ? options.accumulate : true;
    const float scale = last ? options.scale : 1.0f;
    if (format.sign) {
      QuantizedSumKernel<true>
          <<<grid, kThreads, 0, stream>>>(batch, 1, format.bucket_size, dense, n, acc, scale);
    } else {
      QuantizedSumKernel<false><<<grid, kThreads, 0, stream>>>(
          batch, format.bits, format.bucket_size, dense, n, acc, scale);
    }
    GRADWIRE_CUDA_CHECK_LAUNCH("QuantizedSumKernel");
    return absl::OkStatus();
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
