// Dense casts on the GPU (fp32 copy, fp16, bf16) with fused error feedback,
// and their decoder. Same contract and byte layout as kernels/cpu/cast.h,
// plus a stream.
//
// All pointers are device memory (stats too; may be null). The values
// section may have any alignment, as in a frame. No temp storage, no
// allocation, no host synchronization. A refused call (InvalidArgument: an
// unknown format, null buffers with n > 0) writes nothing, stats included.
// Bytes: 12n + n * ValueWidth(format) with error feedback, one pass.
#ifndef GRADWIRE_KERNELS_CUDA_CAST_H_
#define GRADWIRE_KERNELS_CUDA_CAST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, Stream stream);

// dense[i] += LoadValue(values, i, format).
absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_CAST_H_
