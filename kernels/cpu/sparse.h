// Decoding sparse (index, value) pairs into a dense gradient.
#ifndef GRADWIRE_KERNELS_CPU_SPARSE_H_
#define GRADWIRE_KERNELS_CPU_SPARSE_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// dense[indices[j]] += LoadValue(values, j, format) for j < k. The caller
// has validated the indices (each < the dense length; the wire format also
// guarantees strictly ascending, so no two writes collide - the CUDA
// version relies on that to scatter without atomics).
void SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                            ValueFormat format, float* dense);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_SPARSE_H_
