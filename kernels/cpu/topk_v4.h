// Internal to kernels/cpu/topk.cc: exact and approximate top-k's two
// loops over many elements at sixteen lanes, for x86-64-v4 (AVX-512),
// where each block's selected lanes leave by one register compress
// instead of eight-lane table shuffles. topk.cc calls them only where
// CpuIsX86V4(); they compute exactly what its clones compute (the same
// one IEEE add, integer keys and compares, the same order), which
// topk_test checks in each build (the v3 build leaves these out).
#ifndef GRADWIRE_KERNELS_CPU_TOPK_V4_H_
#define GRADWIRE_KERNELS_CPU_TOPK_V4_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/radix_select.h"
#include "gradwire/kernels/cpu/topk_sample.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace topk_v4 {

#if GRADWIRE_CPU_V4_FUNCTIONS
// topk.cc's AccumulateAndCollect: acc = grad + residual into the residual
// (0 where `guess` says, with `zero`), the candidates (key >= lower) and
// their acc appended in index order to t; returns how many, and the
// count of non-finite acc in *nonfinite.
uint64_t AccumulateAndCollect(const float* grad, float* residual, uint64_t n, uint32_t lower,
                              bool zero, const internal::ZeroGuess& guess,
                              const internal::SelectTemp& t, uint64_t* nonfinite);

// topk.cc's EmitSelected: of the m candidates in t, writes the k whose
// rank (key >> shift, shift 0 or kTopShift with `band`) is above `cut`,
// or equal while fewer than `take_equal` equal ones were taken, to
// indices/values in index order, and settles the candidates' residuals
// (when `zeroed`, the rejected ones that `guess` names get acc back and
// the taken ones it does not name 0; else the taken ones get ResidualAfter(acc,
// decoded)).
void EmitSelected(const internal::SelectTemp& t, uint64_t m, uint64_t k, uint32_t cut,
                  uint64_t take_equal, bool band, bool zeroed, const internal::ZeroGuess& guess,
                  float* residual, ValueFormat format, uint32_t* indices, uint8_t* values);
#endif

}  // namespace topk_v4
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_TOPK_V4_H_
