// Internal to kernels/cpu/topk.cc: exact and approximate top-k's two
// loops over many elements, written with intrinsics for the widest
// registers a CPU has, beside the portable clones in topk.cc:
//   topk_v4 (topk_v4.cc): sixteen lanes of x86-64-v4 (AVX-512), where each
//     block's selected lanes leave by one register compress;
//   topk_v3 (topk_v3.cc): eight lanes of x86-64-v3 (AVX2), where they
//     leave by compress_store.h's table-driven permutes. The portable
//     loops in topk.cc (an x86-64-v3 clone of them served AVX2 CPUs
//     before) stage each block's keys and acc through the stack before
//     their masks and shuffles; these keep a group in registers from its
//     loads to its movemask.
// topk.cc calls topk_v4 where CpuIsX86V4(), else topk_v3 where
// CpuIsX86V3(). Both compute exactly what the clones compute (the same one
// IEEE add, integer keys and compares, the same order): topk_test checks
// each build, and its v3 build (GRADWIRE_NO_CPU_V4_CLONES, which leaves
// topk_v4 out) runs topk_v3 on machines with AVX-512 too.
//
// Both namespaces declare the same two functions; topk_wide_entry.inc
// defines them once from each file's loops.
#ifndef GRADWIRE_KERNELS_CPU_TOPK_WIDE_H_
#define GRADWIRE_KERNELS_CPU_TOPK_WIDE_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/radix_select.h"
#include "gradwire/kernels/cpu/topk_sample.h"
#include "gradwire/kernels/element_math.h"

// topk.cc's AccumulateAndCollect: acc = grad + residual into the residual
// (0 where `guess` says, with `zero`), the candidates (key >= lower) and
// their acc appended in index order to t; returns how many, and the
// count of non-finite acc in *nonfinite. With `count`, the candidates'
// keys are also counted by that rule into t.hist (through t.sub_hist).
//
// topk.cc's EmitSelected: of the m candidates in t, writes the k whose
// rank (key >> shift, shift 0 or kTopShift with `band`) is above `cut`,
// or equal while fewer than `take_equal` equal ones were taken, to
// indices/values in index order, and settles the candidates' residuals
// (when `zeroed`, the rejected ones that `guess` names get acc back and
// the taken ones it does not name 0; else the taken ones get
// ResidualAfter(acc, decoded)).
#define GRADWIRE_TOPK_WIDE_DECLARATIONS                                                            \
  uint64_t AccumulateAndCollect(const float* grad, float* residual, uint64_t n, uint32_t lower,    \
                                bool zero, const internal::ZeroGuess& guess,                       \
                                const internal::SelectTemp& t, const internal::BinRule* count,     \
                                uint64_t* nonfinite);                                              \
  void EmitSelected(const internal::SelectTemp& t, uint64_t m, uint64_t k, uint32_t cut,           \
                    uint64_t take_equal, bool band, bool zeroed, const internal::ZeroGuess& guess, \
                    float* residual, ValueFormat format, uint32_t* indices, uint8_t* values);

namespace gradwire {
namespace kernels {
namespace cpu {

#if GRADWIRE_CPU_V4_FUNCTIONS
namespace topk_v4 {
GRADWIRE_TOPK_WIDE_DECLARATIONS
}  // namespace topk_v4
#endif

#if GRADWIRE_CPU_V3_FUNCTIONS
namespace topk_v3 {
GRADWIRE_TOPK_WIDE_DECLARATIONS
}  // namespace topk_v3
#endif

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#undef GRADWIRE_TOPK_WIDE_DECLARATIONS

#endif  // GRADWIRE_KERNELS_CPU_TOPK_WIDE_H_
