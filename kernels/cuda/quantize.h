// Bucketed quantizers on the GPU with fused error feedback, and their
// decoders: QSGD (1-8 bits, stochastic, per-bucket fp32 scales) and sign
// with per-bucket scale. Same contract and byte layout as
// kernels/cpu/quantize.h, plus a stream.
//
// All pointers are device memory (stats too; may be null). Output sections
// may have any alignment, as in a frame. No temp storage, no allocation,
// no host synchronization. A refused call (InvalidArgument: bits outside
// 1..8, bucket_size 0, null buffers with n > 0) writes nothing, stats
// included.
//
// One pass: a block loads a group of whole buckets (a multiple of 8
// elements, so each group's packed codes start on a byte) into shared
// memory, reduces each bucket's scale there, then quantizes, writes whole
// packed bytes and the new residual. Buckets larger than a group take two
// passes (scales, then codes). Bytes: read grad and residual, write the
// residual, codes and scales: 12n + nb/8 + 4n/B.
//
// Bit-exactness with the CPU: QSGD's scale is a max (any order), codes and
// casts are per element. The sign scale is a mean whose sum the CPU forms
// in double, left to right; here one thread per bucket adds in that same
// order (a dependent chain of bucket_size double adds: fine for buckets up
// to a few thousand, slow for very large ones), so every output is the
// CPU's to the bit.
#ifndef GRADWIRE_KERNELS_CUDA_QUANTIZE_H_
#define GRADWIRE_KERNELS_CUDA_QUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, Stream stream);

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense, Stream stream);

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats, Stream stream);

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_QUANTIZE_H_
