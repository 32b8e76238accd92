// Random-k on the GPU with indices every rank can derive from (seed, step),
// with fused error feedback. Same contract as kernels/cpu/randomk.h (the
// same k indices, values and residual, bit for bit), plus a stream; the
// selection is top-k's (kernels/cuda/radix_select.cuh) over the complement
// of the random key.
//
// Every pointer is device memory, `stats` too (may be null). Temp storage
// follows CUB as in kernels/cuda/topk.h. Requires k <= n <= 2^32;
// InvalidArgument otherwise, or for null buffers, or too little temp
// storage. Errors from CUDA come back as Internal, naming the call.
#ifndef GRADWIRE_KERNELS_CUDA_RANDOMK_H_
#define GRADWIRE_KERNELS_CUDA_RANDOMK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// The k indices for (seed, step, n), ascending (a receiver's call).
absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices, Stream stream);

// RandomKIndices plus the fused compress: values[j] = acc[indices[j]]
// rounded to `format`; residual as in kernels/cpu/topk.h. `indices` may
// be null: values only.
absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_RANDOMK_H_
