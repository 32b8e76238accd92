// Internal to kernels/cpu/randomk.cc: random-k's two loops over every
// element, with fp32 values, written with intrinsics for the widest
// registers a CPU has, beside the portable clones in randomk.cc: the
// fused compress pass and the receive side's average. A group's
// selection is a lane mask, from the bitmap or from the lanes' element
// hashes compared with the bound; its values leave by one compress
// (encode) and arrive by one expand (decode), with no loop over the
// group's selected lanes.
//   randomk_v4 (randomk_v4.cc): sixteen lanes of x86-64-v4 (AVX-512),
//     register compresses and expands;
//   randomk_v3 (randomk_v3.cc): eight lanes of x86-64-v3 (AVX2),
//     compress_store.h's table-driven permutes (the portable clone staged
//     blocks of 256 on the stack and walked their bits).
// randomk.cc calls randomk_v4 where CpuIsX86V4(), else randomk_v3 where
// CpuIsX86V3(). Both compute exactly what the clones compute (the same
// IEEE adds in the same order, integer hashes): cpu_clones_test and
// randomk_test check each build, and their v3 builds
// (GRADWIRE_NO_CPU_V4_CLONES, which leaves randomk_v4 out) run randomk_v3
// on machines with AVX-512 too.
//
// Both namespaces declare the same two functions; randomk_wide_entry.inc
// defines them once from each file's loops.
#ifndef GRADWIRE_KERNELS_CPU_RANDOMK_WIDE_H_
#define GRADWIRE_KERNELS_CPU_RANDOMK_WIDE_H_

#include <stddef.h>
#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace randomk_wide {

// Which indices a call selects: the set bits of `bitmap` (one bit per
// index), or, with bitmap null, those whose ElementHash under `key` is
// below `bound`.
struct Selected {
  const uint64_t* bitmap = nullptr;
  ElementKey key;
  uint32_t bound = 0;
};

}  // namespace randomk_wide

// CompressPass: randomk.cc's compress pass with fp32 values: acc = grad +
// residual; the residual (if not null) becomes acc for the unselected
// finite elements and +0 for the rest (ResidualAfter(acc, acc) is +0);
// the selected indices (unless `indices` is null) and acc are written in
// index order to indices/values, which hold k entries (k = how many are
// selected).
// Returns how many acc are not finite.
//
// DecodeAverage: randomk.cc's average with fp32 values (k selected): for
// the j-th selected index i,
// out[i] = (((+0 + v_0[j]) + v_1[j]) + ... + v_{p-1}[j]) / divisor (a
// multiply when ExactReciprocal), and +0 for every other i < n.
#define GRADWIRE_RANDOMK_WIDE_DECLARATIONS                                                  \
  using randomk_wide::Selected;                                                             \
  uint64_t CompressPass(const float* grad, float* residual, uint64_t n, uint64_t k,         \
                        const Selected& s, uint32_t* indices, float* values);               \
  void DecodeAverage(const Selected& s, uint64_t n, uint64_t k, const float* const* values, \
                     size_t p, float divisor, float* out);

#if GRADWIRE_CPU_V4_FUNCTIONS
namespace randomk_v4 {
GRADWIRE_RANDOMK_WIDE_DECLARATIONS
}  // namespace randomk_v4
#endif

#if GRADWIRE_CPU_V3_FUNCTIONS
namespace randomk_v3 {
GRADWIRE_RANDOMK_WIDE_DECLARATIONS
}  // namespace randomk_v3
#endif

#undef GRADWIRE_RANDOMK_WIDE_DECLARATIONS

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RANDOMK_WIDE_H_
