#include "gradwire/kernels/cpu/sparse.h"

namespace gradwire {
namespace kernels {
namespace cpu {

void SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                            ValueFormat format, float* dense) {
  for (uint64_t j = 0; j < k; ++j) dense[indices[j]] += LoadValue(values, j, format);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
