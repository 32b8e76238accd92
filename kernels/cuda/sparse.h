// Decoding one payload of sparse (index, value) pairs into a dense gradient
// on the GPU. Same contract as kernels/cpu/sparse.h, plus a stream; for the
// sum of many workers' payloads see kernels/cuda/sparse_sum.h.
#ifndef GRADWIRE_KERNELS_CUDA_SPARSE_H_
#define GRADWIRE_KERNELS_CUDA_SPARSE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// dense[indices[j]] += value j, for j < k. Device memory throughout.
absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, Stream stream);
// The indices are the caller's to validate (each < the dense length,
// strictly ascending, so the scatter needs no atomics): this call has no
// dense length to check them against. Payloads that arrive on the device
// unchecked go through SparseSumToDense (sparse_sum.h), which checks them.

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_SPARSE_H_
