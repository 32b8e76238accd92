// ElementHash over runs of consecutive indices, for the cloned loops.
//
// The hash needs two 64-bit multiplies per element, which GCC does not
// vectorize on its own below AVX-512. Written with GCC vector extensions,
// every clone multiplies eight 64-bit lanes at a time its own way: AVX-512
// natively (vpmullq), AVX2 and SSE2 from 32-bit products. The results are
// ElementHash's to the bit (integer arithmetic only; tests compare them).
#ifndef GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
#define GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// out[j] = ElementHash(stream_key, first + j) >> 32 (RandomKKey) for
// j < count.
GRADWIRE_CPU_INLINE void HashHigh32(uint64_t stream_key, uint64_t first, uint64_t count,
                                    uint32_t* out) {
  typedef uint64_t U64x8 __attribute__((vector_size(64)));
  // ElementHash's argument, key + (index + 1) * kGolden64, stepped by adding.
  const uint64_t base = stream_key + (first + 1) * kGolden64;
  U64x8 z0;
  for (int l = 0; l < 8; ++l) z0[l] = base + static_cast<uint64_t>(l) * kGolden64;
  uint64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    U64x8 z = z0;  // Mix64, lane by lane
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    for (int l = 0; l < 8; ++l) out[j + l] = static_cast<uint32_t>(z[l] >> 32);
    z0 += 8 * kGolden64;
  }
  for (; j < count; ++j) out[j] = RandomKKey(stream_key, first + j);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
