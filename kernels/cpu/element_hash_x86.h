// ElementHash (element_math.h) eight lanes at a time, for the cloned loops.
//
// GCC vector extensions on 32-bit lanes: every clone compiles the rounds
// to its widest 32-bit multiply (pmulld on x86-64-v3, 8 lanes; the
// baseline emulates it with pmuludq). The results are ElementHash's and
// ElementHashInverse's to the bit (integer arithmetic only; tests compare
// them).
#ifndef GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
#define GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_

#include <stdint.h>
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

typedef uint32_t HashU32x8 __attribute__((vector_size(32)));

// HashRound (kInverse: HashRoundInverse) of eight lanes, in place. kFull:
// key.bits == 32, so no masking, and the shifts are the constant 16.
// (Vectors go by pointer: returned by value they would draw GCC's ABI
// warning for the baseline clone.)
template <bool kFull, bool kInverse>
GRADWIRE_CPU_INLINE void HashRound8(const ElementKey& k, HashU32x8* v) {
  const uint32_t s = kFull ? 16 : k.shift;
  HashU32x8 x = *v;
  x ^= x >> s;
  x *= kInverse ? kHashMul2Inverse : kHashMul1;
  if (!kFull) x &= k.mask;
  x ^= x >> s;
  x *= kInverse ? kHashMul1Inverse : kHashMul2;
  if (!kFull) x &= k.mask;
  *v = x ^ (x >> s);
}

// ElementHashInverse of eight hashes, in place.
template <bool kFull>
GRADWIRE_CPU_INLINE void ElementHashInverse8(const ElementKey& k, HashU32x8* v) {
  HashRound8<kFull, true>(k, v);
  *v ^= k.mix;
  HashRound8<kFull, true>(k, v);
  *v -= k.add;
  if (!kFull) *v &= k.mask;
}

// out[j] = ElementHash(key, first + j) for j < count; kFull as above.
template <bool kFull>
GRADWIRE_CPU_INLINE void HashRun(const ElementKey& key, uint64_t first, uint64_t count,
                                 uint32_t* out) {
  HashU32x8 x = HashU32x8{0, 1, 2, 3, 4, 5, 6, 7} + (static_cast<uint32_t>(first) + key.add);
  uint64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    HashU32x8 h = kFull ? x : x & key.mask;
    HashRound8<kFull, false>(key, &h);
    h ^= key.mix;
    HashRound8<kFull, false>(key, &h);
    memcpy(out + j, &h, sizeof h);
    x += 8;
  }
  for (; j < count; ++j) out[j] = ElementHash(key, first + j);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
