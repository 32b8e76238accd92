// Sums P workers' quantized payloads (QSGD or sign, same bits and bucket
// size for all) into one dense buffer on the GPU. Same contract and bits as
// kernels/cpu/quantized_sum.h, plus a stream: one pass over n, each thread
// decodes its elements from every worker in worker order.
//
// Bytes: P * (nb/8 + 4n/B) read + 4n written (8n when accumulating).
#ifndef GRADWIRE_KERNELS_CUDA_QUANTIZED_SUM_H_
#define GRADWIRE_KERNELS_CUDA_QUANTIZED_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// dense[i] = (start[i] + d_0[i] + ... + d_{P-1}[i]) * scale, d_w worker w's
// decoded value. The sections and `dense` are device memory, the payload
// descriptors a host array (64 workers per launch, more take several
// launches in order). InvalidArgument (nothing written) as the CPU version
// (kernels/validate.h ValidateQuantizedSum), or for a null dense with n > 0.
absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads,
                                 const QuantizedFormat& format, float* dense, uint64_t n,
                                 const SparseSumOptions& options, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_QUANTIZED_SUM_H_
