// Internal to kernels/cpu/randomk.cc: random-k's two loops over every
// element at sixteen lanes, for x86-64-v4 (AVX-512), with fp32 values:
// the fused compress pass and the receive side's average. A block's
// selection is a 16-bit mask, from the bitmap or from sixteen element
// hashes compared with the bound; its values leave by one register
// compress (encode) or arrive by one expand per payload (decode), with no
// loop over the block's selected lanes. randomk.cc calls them only where
// CpuIsX86V4(); they compute exactly what its clones compute (the same
// IEEE adds in the same order, integer hashes), which cpu_clones_test
// checks in each build (the v3 build leaves these out).
#ifndef GRADWIRE_KERNELS_CPU_RANDOMK_V4_H_
#define GRADWIRE_KERNELS_CPU_RANDOMK_V4_H_

#include <stddef.h>
#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace randomk_v4 {

// Which indices a call selects: the set bits of `bitmap` (one bit per
// index), or, with bitmap null, those whose ElementHash under `key` is
// below `bound`.
struct Selected {
  const uint64_t* bitmap = nullptr;
  ElementKey key;
  uint32_t bound = 0;
};

#if GRADWIRE_CPU_V4_FUNCTIONS
// randomk.cc's compress pass with fp32 values: acc = grad + residual; the
// residual (if not null) becomes acc for the unselected finite elements
// and +0 for the rest (ResidualAfter(acc, acc) is +0); the selected
// indices and acc are written in index order to indices/values, which
// hold k entries (k = how many are selected). Returns how many acc are
// not finite.
uint64_t CompressPass(const float* grad, float* residual, uint64_t n, uint64_t k, const Selected& s,
                      uint32_t* indices, float* values);

// randomk.cc's average with fp32 values (k selected): for the j-th
// selected index i,
// out[i] = (((+0 + v_0[j]) + v_1[j]) + ... + v_{p-1}[j]) / divisor (a
// multiply when ExactReciprocal), and +0 for every other i < n.
void DecodeAverage(const Selected& s, uint64_t n, uint64_t k, const float* const* values, size_t p,
                   float divisor, float* out);
#endif

}  // namespace randomk_v4
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RANDOMK_V4_H_
