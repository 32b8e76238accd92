// CPU reference for summing P workers' quantized payloads (QSGD or sign,
// same bits and bucket size for all) into one dense buffer, with optional
// averaging. The CUDA version (kernels/cuda/quantized_sum.h) gives the
// same bits: both add worker 0's decoded values, then worker 1's, ...
#ifndef GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_
#define GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// dense[i] = (start[i] + d_0[i] + ... + d_{P-1}[i]) * scale, d_w the
// worker's decoded value. InvalidArgument (dense untouched) for null
// sections, bits outside 1..8 (1 for sign), bucket_size 0 (the checks of
// kernels/validate.h ValidateQuantizedSum, shared with the CUDA version).
absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads,
                                 const QuantizedFormat& format, absl::Span<float> dense,
                                 const SparseSumOptions& options);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_
