// Top-k by magnitude, exact and approximate, with fused error feedback.
//
// Common contract of the compress kernels in kernels/cpu/ (the CUDA
// kernels in kernels/cuda/ mirror it, adding a stream):
//   acc[i] = grad[i] + residual[i]   (residual null: acc = grad, no EF)
//   decoded[i] = what a receiver reconstructs for element i
//   residual[i] <- ResidualAfter(acc[i], decoded[i])   (element_math.h)
// all in one call: grad and residual are read once in full (plus a
// sample and the few selection candidates) and the residual written once
// (plus the few candidates a kernel rejects or selects after the pass).
// n is 64-bit everywhere; indices are u32, so n <= 2^32. Preconditions
// are the caller's (lib/ validates before it calls); kernels do not
// allocate.
//
// Temp storage follows CUB: call once with temp == nullptr to learn
// *temp_bytes for (n, k), allocate, call again with the same arguments.
// The buffer may be reused across calls and gradients of the same size.
//
// Selection order: a larger MagnitudeKey(acc) wins (NaN lowest, ±Inf
// highest); equal keys go to the lower index. Output indices are strictly
// ascending, values[j] is acc[indices[j]] rounded to `format`, stored
// little endian (ValueWidth(format) bytes each, any alignment). The
// outputs are the caller's buffers, apart from temp, or the ones
// TopKOutputsInTemp names inside temp.
#ifndef GRADWIRE_KERNELS_CPU_TOPK_H_
#define GRADWIRE_KERNELS_CPU_TOPK_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// Exact top-k: a radix selection, not a sort. A sample of 4K keys (16K
// from 4M elements up) gives a lower bound that about k plus five standard
// deviations of the sample's count (plus slack) elements reach; the one
// fused pass over n collects those candidates while it writes the
// residual; two histogram passes over only the candidates (the two
// binades above the bound in 4096 bins, then the k-th key's bin;
// radix_select.h) find the exact k-th key. If the sample misjudged (fewer
// than k candidates) every element becomes a candidate: slower, never
// wrong. Handles k = 0 (nothing selected, residual = acc), k = n and
// n = 0. Requires k <= n <= 2^32. temp_bytes is 8 * n + 160 KiB (the
// candidate lists' worst case, indices and acc), of which typically
// little is touched.
void TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual, uint64_t n,
                  uint64_t k, ValueFormat format, uint32_t* indices, uint8_t* values,
                  FusedStats* stats);

// Approximate top-k in the spirit of MSTopK: instead of binary-searching a
// threshold with one counting pass per candidate, every candidate
// threshold is counted at once (a histogram of the keys' top 11 bits:
// exponent plus 3 mantissa bits, so a bin spans a magnitude ratio of at
// most 1.125 for normal floats). The bin holding the k-th largest key is
// the band; everything above it is kept and the rest of k is filled from
// the band in index order, with no refinement inside the band: the
// selection is every element above the band and the band's lowest-index
// members, a function of acc and k alone, the same on CPU and GPU. (The
// CPU version histograms the candidates of exact top-k's sampled pass,
// its bound rounded down to a whole bin, so on a CPU it costs about what
// exact top-k does; on a GPU the saving is the refinement passes and the
// sort-free fill.)
//
// Tolerance: exactly min(k, n) elements are selected (count error 0).
// Which ones is approximate only within the band: every selected |acc| is
// > 1/1.125 (about 0.889) times the exact k-th largest |acc|, and every
// unselected |acc| is < 1.125 times it, for normal floats. `band`, if
// non-null, receives the band used (ApproxTopKBand, kernels/types.h).
// temp_bytes as for TopKCompress.
void ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                        uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                        uint8_t* values, FusedStats* stats, ApproxTopKBand* band);

// Where TopKCompress and ApproxTopKCompress may leave their k outputs
// inside `temp` (of the size query's bytes for n): over the candidate
// lists. The last step, which reads the candidates in index order and
// writes the selected ones, then compacts them in place: it reads each
// group before it writes, and writes no further than it has read. A
// caller that codes the outputs into a frame (lib's sparse codecs) reads
// them from there, valid until temp is used again, instead of having them
// written to k * (4 + width) bytes of its own, lines no cache holds after
// the pass over n elements, each first read from memory (and the buffer
// they would take).
OutputsInTemp TopKOutputsInTemp(void* temp, uint64_t n);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_TOPK_H_
