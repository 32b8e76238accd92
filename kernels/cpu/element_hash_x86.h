// ElementHash over runs of consecutive indices, for the cloned loops.
//
// The hash needs two 64-bit multiplies per element, which GCC does not
// vectorize on its own below AVX-512. Written with GCC vector extensions
// on the 64-bit values' 32-bit halves, every clone hashes eight lanes at a
// time from 32-bit products (see MulLanes). The results are ElementHash's
// to the bit (integer arithmetic only; tests compare them).
#ifndef GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
#define GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// Eight lanes of 32-bit halves: the hash runs on eight 64-bit values held
// as their low and high halves in two vectors ("structure of arrays"), so
// that every clone multiplies with 32-bit lanes: a 32 x 32 -> 64 product
// per even and per odd lane (pmuludq), and the cross terms, which only
// reach the high half, as 32-bit products of eight lanes at once (pmulld).
// That is fewer multiplies than 64-bit lanes need below AVX-512, and the
// high halves wanted come out contiguous, with no packing.
typedef uint32_t HashU32x8 __attribute__((vector_size(32)));
typedef uint64_t HashU64x4 __attribute__((vector_size(32)));

// The 64-bit products (lo, hi) * c of eight lanes, modulo 2^64.
GRADWIRE_CPU_INLINE void MulLanes(const HashU32x8& lo, const HashU32x8& hi, uint64_t c,
                                  HashU32x8* out_lo, HashU32x8* out_hi) {
  uint32_t c_lo = static_cast<uint32_t>(c), c_hi = static_cast<uint32_t>(c >> 32);
  // Hidden from the optimizer: it would multiply by the known constant
  // with shifts and adds, dozens of them, instead of one pmuludq.
  __asm__("" : "+r"(c_lo), "+r"(c_hi));
  const HashU64x4 wide = (HashU64x4)lo;
  const HashU64x4 c64 = HashU64x4{} + c_lo;
  const HashU64x4 even = (wide & 0xffffffffull) * c64;  // lanes 0, 2, 4, 6
  const HashU64x4 odd = (wide >> 32) * c64;             // lanes 1, 3, 5, 7
  const HashU32x8 e = (HashU32x8)even, o = (HashU32x8)odd;
  const HashU32x8 e_hi = (HashU32x8)(even >> 32), o_lo = (HashU32x8)(odd << 32);
  // Both results are formed before either is stored: out_lo may alias lo.
  const HashU32x8 product_lo = __builtin_shuffle(e, o_lo, HashU32x8{0, 9, 2, 11, 4, 13, 6, 15});
  const HashU32x8 product_hi =
      __builtin_shuffle(e_hi, o, HashU32x8{0, 9, 2, 11, 4, 13, 6, 15}) + lo * c_hi + hi * c_lo;
  *out_lo = product_lo;
  *out_hi = product_hi;
}

// out[j] = ElementHash(stream_key, first + j) >> 32 (RandomKKey) for
// j < count.
GRADWIRE_CPU_INLINE void HashHigh32(uint64_t stream_key, uint64_t first, uint64_t count,
                                    uint32_t* out) {
  // ElementHash's argument, key + (index + 1) * kGolden64, stepped by adding.
  const uint64_t base = stream_key + (first + 1) * kGolden64;
  HashU32x8 z_lo, z_hi;
  for (int l = 0; l < 8; ++l) {
    const uint64_t z = base + static_cast<uint64_t>(l) * kGolden64;
    z_lo[l] = static_cast<uint32_t>(z);
    z_hi[l] = static_cast<uint32_t>(z >> 32);
  }
  const uint64_t step = 8 * kGolden64;
  const uint32_t step_lo = static_cast<uint32_t>(step), step_hi = static_cast<uint32_t>(step >> 32);
  uint64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    // Mix64: z ^= z >> 30; z *= C1; z ^= z >> 27; z *= C2; z ^= z >> 31,
    // of which only the high half is wanted: the last product's high half
    // t, and t ^ (t >> 31).
    HashU32x8 lo = z_lo ^ ((z_lo >> 30) | (z_hi << 2));
    HashU32x8 hi = z_hi ^ (z_hi >> 30);
    MulLanes(lo, hi, 0xbf58476d1ce4e5b9ull, &lo, &hi);
    lo ^= (lo >> 27) | (hi << 5);
    hi ^= hi >> 27;
    HashU32x8 unused, t;
    MulLanes(lo, hi, 0x94d049bb133111ebull, &unused, &t);
    const HashU32x8 h = t ^ (t >> 31);
    memcpy(out + j, &h, sizeof h);
    // z += 8 * kGolden64, the carry out of the low half into the high.
    const HashU32x8 next_lo = z_lo + step_lo;
    z_hi += step_hi - (HashU32x8)(next_lo < z_lo);
    z_lo = next_lo;
  }
  for (; j < count; ++j) out[j] = RandomKKey(stream_key, first + j);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_ELEMENT_HASH_X86_H_
