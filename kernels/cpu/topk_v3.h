// Internal to kernels/cpu/topk.cc: exact and approximate top-k's two
// loops over many elements at eight lanes, written for x86-64-v3 (AVX2)
// with intrinsics, where the portable clone stages each block's keys and
// acc through the stack before its masks and table shuffles. Each group
// of eight here goes from its loads to its compare, its movemask and its
// table-driven permutes (compress_store.h's table) in registers.
// topk.cc calls them only where CpuIsX86V3() and not CpuIsX86V4(); they
// compute exactly what its clones compute (the same one IEEE add, integer
// keys and compares, the same order), which topk_test checks in the v3
// build (GRADWIRE_NO_CPU_V4_CLONES) and cpu_clones_test against the
// baseline.
#ifndef GRADWIRE_KERNELS_CPU_TOPK_V3_H_
#define GRADWIRE_KERNELS_CPU_TOPK_V3_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/radix_select.h"
#include "gradwire/kernels/cpu/topk_sample.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace topk_v3 {

#if GRADWIRE_CPU_V3_FUNCTIONS
// topk.cc's AccumulateAndCollect (topk_v4.h says what it computes).
uint64_t AccumulateAndCollect(const float* grad, float* residual, uint64_t n, uint32_t lower,
                              bool zero, const internal::ZeroGuess& guess,
                              const internal::SelectTemp& t, uint64_t* nonfinite);

// topk.cc's EmitSelected (topk_v4.h says what it computes).
void EmitSelected(const internal::SelectTemp& t, uint64_t m, uint64_t k, uint32_t cut,
                  uint64_t take_equal, bool band, bool zeroed, const internal::ZeroGuess& guess,
                  float* residual, ValueFormat format, uint32_t* indices, uint8_t* values);
#endif

}  // namespace topk_v3
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_TOPK_V3_H_
