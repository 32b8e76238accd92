// CPU reference for summing P workers' quantized payloads (QSGD or sign,
// same bits and bucket size for all) into one dense buffer, with optional
// averaging. The CUDA version (kernels/cuda/decode_accumulate.h) gives the
// same bits: both add worker 0's decoded values, then worker 1's, ...
#ifndef GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_
#define GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cpu/sparse_sum.h"

namespace gradwire {
namespace kernels {

// One worker's sections, laid out as kernels/cpu/quantize.h writes them.
struct QuantizedPayload {
  const uint8_t* scales = nullptr;  // BucketCount(n, bucket_size) fp32, little endian
  const uint8_t* packed = nullptr;  // PackedBytes(n, bits)
};

struct QuantizedFormat {
  bool sign = false;  // true: SignDecode (bits must be 1); false: QSGD
  uint32_t bits = 4;
  uint32_t bucket_size = 512;
};

namespace cpu {

// dense[i] = (start[i] + d_0[i] + ... + d_{P-1}[i]) * scale, d_w the
// worker's decoded value. InvalidArgument (dense untouched) for null
// sections, bits outside 1..8 (1 for sign), bucket_size 0.
absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads,
                                 const QuantizedFormat& format, absl::Span<float> dense,
                                 const SparseSumOptions& options);

// The checks above, shared with the CUDA entry point.
absl::Status ValidateQuantizedSum(absl::Span<const QuantizedPayload> payloads,
                                  const QuantizedFormat& format, uint64_t n);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QUANTIZED_SUM_H_
