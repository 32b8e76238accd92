// ElementHash (element_math.h) eight lanes at a time, for the cloned loops
// and (in AVX2 registers) the x86-64-v3 loops, and sixteen in AVX-512
// registers for the x86-64-v4 loops.
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

// out[j] = RoundingHash(key, first + j) for j < count (key.bits == 32).
GRADWIRE_CPU_INLINE void RoundingHashRun(const ElementKey& key, uint64_t first, uint64_t count,
                                         uint32_t* out) {
  HashU32x8 x = HashU32x8{0, 1, 2, 3, 4, 5, 6, 7} * kRoundingStride + RoundingHashInput(key, first);
  uint64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    HashU32x8 h = x ^ key.mix;
    HashRound8<true, false>(key, &h);
    memcpy(out + j, &h, sizeof h);
    x += 8 * kRoundingStride;
  }
  for (; j < count; ++j) out[j] = RoundingHash(key, first + j);
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// Eight lanes in AVX2 registers, for the loops written for x86-64-v3
// (clones_x86.h): the key's fields broadcast once.
struct ElementKey8 {
  __m256i add, mix, mask;
  __m128i shift;
};

GRADWIRE_CPU_V3 inline __attribute__((always_inline)) ElementKey8 MakeElementKey8(
    const ElementKey& key) {
  ElementKey8 k;
  k.add = _mm256_set1_epi32(static_cast<int32_t>(key.add));
  k.mix = _mm256_set1_epi32(static_cast<int32_t>(key.mix));
  k.mask = _mm256_set1_epi32(static_cast<int32_t>(key.mask));
  k.shift = _mm_cvtsi32_si128(static_cast<int>(key.shift));
  return k;
}

// x ^ (x >> shift), the shift 16 when kFull.
template <bool kFull>
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256i XorShift8(const ElementKey8& k,
                                                                        __m256i x) {
  return _mm256_xor_si256(x, kFull ? _mm256_srli_epi32(x, 16) : _mm256_srl_epi32(x, k.shift));
}

// ElementHash of kCount vectors of eight indices (each < 2^32), in
// place; kFull as for HashRound8. Each step is applied to all kCount
// vectors before the next, so that their chains of dependent steps (~30
// cycles each) run at once: a loop hashing one vector at a time keeps
// one or two in flight (random-k's loops at 10 %, four vectors a step:
// 1.3x faster at 25.6M on a Zen 3 core,
// docs/results/2026-12-07-randomk-four-chains.md).
template <bool kFull, int kCount>
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) void ElementHashesV3(const ElementKey8& k,
                                                                            __m256i x[kCount]) {
  const __m256i mul1 = _mm256_set1_epi32(static_cast<int32_t>(kHashMul1));
  const __m256i mul2 = _mm256_set1_epi32(static_cast<int32_t>(kHashMul2));
#pragma GCC unroll 8
  for (int g = 0; g < kCount; ++g) {
    x[g] = _mm256_add_epi32(x[g], k.add);
    if (!kFull) x[g] = _mm256_and_si256(x[g], k.mask);
  }
  // Two HashRounds, the key's mix between them.
#pragma GCC unroll 2
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
#pragma GCC unroll 8
      for (int g = 0; g < kCount; ++g) x[g] = _mm256_xor_si256(x[g], k.mix);
    }
#pragma GCC unroll 8
    for (int g = 0; g < kCount; ++g) x[g] = _mm256_mullo_epi32(XorShift8<kFull>(k, x[g]), mul1);
    if (!kFull) {
#pragma GCC unroll 8
      for (int g = 0; g < kCount; ++g) x[g] = _mm256_and_si256(x[g], k.mask);
    }
#pragma GCC unroll 8
    for (int g = 0; g < kCount; ++g) x[g] = _mm256_mullo_epi32(XorShift8<kFull>(k, x[g]), mul2);
    if (!kFull) {
#pragma GCC unroll 8
      for (int g = 0; g < kCount; ++g) x[g] = _mm256_and_si256(x[g], k.mask);
    }
#pragma GCC unroll 8
    for (int g = 0; g < kCount; ++g) x[g] = XorShift8<kFull>(k, x[g]);
  }
}

// ElementHash of eight indices (each < 2^32).
template <bool kFull>
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256i ElementHashV3(const ElementKey8& k,
                                                                            __m256i index) {
  __m256i x[1] = {index};
  ElementHashesV3<kFull, 1>(k, x);
  return x[0];
}
#endif  // GRADWIRE_CPU_V3_FUNCTIONS

#if GRADWIRE_CPU_V4_FUNCTIONS
GRADWIRE_CPU_V4_BEGIN
// The same sixteen lanes at a time, in AVX-512 registers, for the loops
// written for x86-64-v4 (clones_x86.h): the key's fields broadcast once.
struct ElementKey16 {
  __m512i add, mix, mask;
  __m128i shift;
};

GRADWIRE_CPU_V4 inline __attribute__((always_inline)) ElementKey16 MakeElementKey16(
    const ElementKey& key) {
  ElementKey16 k;
  k.add = _mm512_set1_epi32(static_cast<int32_t>(key.add));
  k.mix = _mm512_set1_epi32(static_cast<int32_t>(key.mix));
  k.mask = _mm512_set1_epi32(static_cast<int32_t>(key.mask));
  k.shift = _mm_cvtsi32_si128(static_cast<int>(key.shift));
  return k;
}

// x ^ (x >> shift), the shift 16 when kFull.
template <bool kFull>
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512i XorShift16(const ElementKey16& k,
                                                                         __m512i x) {
  return _mm512_xor_si512(x, kFull ? _mm512_srli_epi32(x, 16) : _mm512_srl_epi32(x, k.shift));
}

// HashRound of sixteen lanes; kFull as for HashRound8.
template <bool kFull>
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512i HashRound16(const ElementKey16& k,
                                                                          __m512i x) {
  x = _mm512_mullo_epi32(XorShift16<kFull>(k, x),
                         _mm512_set1_epi32(static_cast<int32_t>(kHashMul1)));
  if (!kFull) x = _mm512_and_si512(x, k.mask);
  x = _mm512_mullo_epi32(XorShift16<kFull>(k, x),
                         _mm512_set1_epi32(static_cast<int32_t>(kHashMul2)));
  if (!kFull) x = _mm512_and_si512(x, k.mask);
  return XorShift16<kFull>(k, x);
}

// ElementHash of sixteen indices (each < 2^32).
template <bool kFull>
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512i ElementHash16(const ElementKey16& k,
                                                                            __m512i index) {
  __m512i x = _mm512_add_epi32(index, k.add);
  if (!kFull) x = _mm512_and_si512(x, k.mask);
  return HashRound16<kFull>(k, _mm512_xor_si512(HashRound16<kFull>(k, x), k.mix));
}
GRADWIRE_CPU_V4_END
#endif  // GRADWIRE_CPU_V4_FUNCTIONS

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
