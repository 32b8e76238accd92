// Decoding sparse (index, value) pairs into a dense gradient.
#ifndef GRADWIRE_KERNELS_CPU_SPARSE_H_
#define GRADWIRE_KERNELS_CPU_SPARSE_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// dense[indices[j]] += LoadValue(values, j, format) for j < k. The caller
// has validated the indices (each < the dense length; the wire format also
// guarantees strictly ascending, so no two writes collide - the CUDA
// version relies on that to scatter without atomics).
void SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                            ValueFormat format, float* dense);

// One worker's validated entries for SparseAverage: k strictly increasing
// indices (< the dense length) and their values in the call's format.
// Several runs may share one index list (random-k).
struct SparseRun {
  const uint32_t* indices = nullptr;
  const uint8_t* values = nullptr;
  uint64_t k = 0;
};

// The receive side of a sparse allgather, into all n elements of `out`:
//   out[i] = (((0 + v_0[i]) + v_1[i]) + ... + v_{P-1}[i]) / divisor
// for every i some run holds (added in run order, absent entries adding
// nothing, divided once; divisor 1 divides nothing), and 0 for every other
// i. Bit for bit what zeroing `out`, SparseDecodeAccumulate of each run in
// order and one division of each touched element give.
//
// Why not that sequence: its scattered adds and divisions each miss the
// cache (out is the whole gradient, runs cover a few % of it). Here out is
// walked once in chunks that fit in L1: each chunk is zeroed, gets its
// share of every run and is divided while still in cache (by a multiply
// over the whole chunk when 1 / divisor is exact, e.g. P = 4).
void SparseAverage(const SparseRun* runs, uint64_t p, ValueFormat format, float divisor,
                   float* out, uint64_t n);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_SPARSE_H_
