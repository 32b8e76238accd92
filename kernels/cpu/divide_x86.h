// Dividing a run of floats in place, for the receive side's averages.
#ifndef GRADWIRE_KERNELS_CPU_DIVIDE_X86_H_
#define GRADWIRE_KERNELS_CPU_DIVIDE_X86_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/streaming_store.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// values[i] = values[i] / divisor for i < n, bit for bit (by a multiply
// when 1 / divisor is exact, which gives the same bits), vectorized in
// every clone (clones_x86.h).
void DivideAll(float* values, uint64_t n, float divisor);

// to[i] = from[i] / divisor, then from[i] = +0, for i < n (the buffers do
// not overlap): DivideAll and a copy out in one pass, bit for bit the same.
// kStreaming writes to's whole cache lines by streaming stores
// (streaming_store.h: the caller fences once it is done).
void DivideAllInto(float* from, float* to, uint64_t n, float divisor,
                   OutStores stores = OutStores::kCached);

// Whether x / divisor == x * *reciprocal for every float x (1 / divisor
// exact: divisor and its reciprocal both powers of two), DivideAll's test;
// kernels that divide as they go pick a multiply by it.
bool ExactReciprocal(float divisor, float* reciprocal);

// Whether an average may divide every element of a run, touched or not:
// +0 / divisor is +0 for a positive, finite divisor (the callers' rank
// count), and a divisor of 1 divides nothing.
inline bool DividesAll(float divisor) {
  return divisor != 1.0f && divisor > 0.0f && divisor <= 3.4028235e38f;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_DIVIDE_X86_H_
