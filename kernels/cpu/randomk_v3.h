// Internal to kernels/cpu/randomk.cc: random-k's two loops over every
// element at eight lanes, written for x86-64-v3 (AVX2) with intrinsics,
// with fp32 values: the fused compress pass and the receive side's
// average. A group's selection is an 8-bit mask, from the bitmap or from
// eight element hashes (ElementHashV3) compared with the bound; its values
// leave by one table-driven permute (encode) or arrive by one per group
// (decode, the expand), where the portable clone stages a block of 256
// on the stack and walks its selected bits. randomk.cc calls them only
// where CpuIsX86V3() and not CpuIsX86V4(); they compute exactly what its
// clones compute (the same IEEE adds in the same order, integer hashes),
// which randomk_v3_test and cpu_clones_v3_test check in the v3 build
// (GRADWIRE_NO_CPU_V4_CLONES).
#ifndef GRADWIRE_KERNELS_CPU_RANDOMK_V3_H_
#define GRADWIRE_KERNELS_CPU_RANDOMK_V3_H_

#include <stddef.h>
#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/randomk_v4.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace randomk_v3 {

#if GRADWIRE_CPU_V3_FUNCTIONS
// randomk_v4.h's CompressPass and DecodeAverage, at eight lanes.
uint64_t CompressPass(const float* grad, float* residual, uint64_t n, uint64_t k,
                      const randomk_v4::Selected& s, uint32_t* indices, float* values);

void DecodeAverage(const randomk_v4::Selected& s, uint64_t n, uint64_t k,
                   const float* const* values, size_t p, float divisor, float* out);
#endif

}  // namespace randomk_v3
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RANDOMK_V3_H_
