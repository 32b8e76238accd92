// Dense casts (fp32 copy, fp16, bf16) with fused error feedback.
//
// values[i] = acc[i] in `format` (little endian, any alignment); the
// residual, when non-null, becomes ResidualAfter(acc, RoundToFormat(acc)):
// the rounding error, or the overflow beyond the format's largest finite
// value (casts saturate, see element_math.h).
#ifndef GRADWIRE_KERNELS_CPU_CAST_H_
#define GRADWIRE_KERNELS_CPU_CAST_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats);

// dense[i] += LoadValue(values, i, format).
void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_CAST_H_
