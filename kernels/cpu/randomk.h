// Random-k with indices every rank can derive from (seed, step).
//
// The k chosen indices are those with the k SMALLEST RandomKKey(
// RandomKElementKey(seed, step, n), i) (element_math.h); the keys of one
// call are distinct. Every rank, CPU or GPU, with the same (seed, step, n,
// k) gets the same set, so indices are never sent: the receiver calls
// RandomKIndices. Output is strictly ascending. Values are NOT rescaled by
// n/k: with error feedback the unsent mass stays in the residual instead.
//
// The CPU finds the set without sorting keys: they are a bijection with a
// cheap inverse, so the k smallest are the first k indices below n among
// the inverses of 0, 1, 2, ... (about k * 2^bits / n <= 2k inverse
// hashes). Up to a density of 1/32, or while the bitmap fits in L2 (n up
// to 2M), those are marked in a bitmap and read out in index order;
// denser and larger, the same walk only finds the k-th smallest key and
// every index is hashed forward against it (eight lanes at a time, inside
// the pass over the elements), which costs less than the bitmap's
// scattered writes to a bitmap out of L2.
//
// Fused error-feedback contract and temp-storage idiom: see topk.h.
#ifndef GRADWIRE_KERNELS_CPU_RANDOMK_H_
#define GRADWIRE_KERNELS_CPU_RANDOMK_H_

#include <stddef.h>
#include <stdint.h>

#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// Writes the k indices for (seed, step, n) to `indices`, ascending.
// Requires k <= n <= 2^32. temp_bytes is 8 * (n / 64 + 1): a bitmap.
void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices);

// RandomKIndices plus the fused compress: values[j] = acc[indices[j]]
// rounded to `format`; residual as in topk.h. `indices` may be null: then
// only the values are written (a random-k frame carries no indices).
void RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                     uint64_t n, uint64_t k, uint64_t seed, uint64_t step, ValueFormat format,
                     uint32_t* indices, uint8_t* values, FusedStats* stats);

// The receive side's average of p random-k payloads of one (seed, step,
// n, k), with the indices derived as it goes instead of written out: for
// the j-th index i of RandomKIndices,
//   out[i] = (((+0 + v_0[j]) + v_1[j]) + ... + v_{p-1}[j]) / divisor
// (values[r] holds k values in `format`), and out[i] = +0 for every other
// i < n: the bits of RandomKIndices and then SparseAverage (sparse_sum.h)
// over p payloads sharing that index list, in one pass over out. Requires
// k <= n <= 2^32 and divisor > 0. temp_bytes as RandomKIndices'.
void RandomKDecodeAverage(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                          uint64_t n, uint64_t k, const uint8_t* const* values, size_t p,
                          ValueFormat format, float divisor, float* out);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RANDOMK_H_
