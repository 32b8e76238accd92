// Compress-store of eight 32-bit lanes by an 8-bit mask, for the cloned
// loops that pick out selected elements in index order (top-k's
// candidates and its emitted outputs, random-k's indices), and its
// inverse, the expand (random-k's average puts each entry back where its
// index is). At 10 % density a walk over the set
// bits (lowest first, one __builtin_ctz each) mispredicts the end of
// nearly every word; a table lookup per eight elements has no branch.
//
// The stores write all eight lanes, of which only the first popcount(mask)
// are meant: the caller makes sure out[0, 8) is writable, and later stores
// overwrite the rest. Integer moves only, so every clone gives the same
// bits (on x86-64-v3 the permute is one vpermd / vpermps).
#ifndef GRADWIRE_KERNELS_CPU_COMPRESS_STORE_H_
#define GRADWIRE_KERNELS_CPU_COMPRESS_STORE_H_

#include <stdint.h>
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"

namespace gradwire {
namespace kernels {
namespace cpu {

struct CompressTable {
  uint32_t lanes[256][8];  // the set bits of the mask, ascending, then zeros
  uint8_t count[256];      // popcount (no popcnt instruction in the baseline clone)
  uint8_t expand[256][8];  // for each set bit, the set bits below it; 0 for clear bits
};

constexpr CompressTable MakeCompressTable() {
  CompressTable t{};
  for (uint32_t m = 0; m < 256; ++m) {
    uint32_t c = 0;
    for (uint32_t b = 0; b < 8; ++b) {
      if ((m >> b) & 1) {
        t.expand[m][b] = static_cast<uint8_t>(c);
        t.lanes[m][c++] = b;
      }
    }
    t.count[m] = static_cast<uint8_t>(c);
  }
  return t;
}

inline constexpr CompressTable kCompressTable = MakeCompressTable();

// out[0, popcount(mask)) = base + each set bit of mask (< 256), ascending;
// out[0, 8) is written. Returns popcount(mask).
GRADWIRE_CPU_INLINE uint32_t StoreSetBits8(uint32_t mask, uint32_t base, uint32_t* out) {
  U32x8 v;
  memcpy(&v, kCompressTable.lanes[mask], sizeof v);
  v += base;
  memcpy(out, &v, sizeof v);
  return kCompressTable.count[mask];
}

// As StoreSetBits8, and vals_out[0, popcount) = vals[each set bit].
GRADWIRE_CPU_INLINE uint32_t StoreSelected8(uint32_t mask, uint32_t base, const float* vals,
                                            uint32_t* out, float* vals_out) {
  U32x8 lanes;
  memcpy(&lanes, kCompressTable.lanes[mask], sizeof lanes);
  F32x8 v;
  memcpy(&v, vals, sizeof v);
  const F32x8 picked = __builtin_shuffle(v, lanes);
  memcpy(vals_out, &picked, sizeof picked);
  const U32x8 idx = lanes + base;
  memcpy(out, &idx, sizeof idx);
  return kCompressTable.count[mask];
}

// As StoreSelected8, for lanes that are not consecutive indices:
// out[0, popcount) = idx[each set bit], vals_out[0, popcount) = vals[each
// set bit]; out[0, 8) and vals_out[0, 8) are written (vals_out needs no
// alignment). Returns popcount(mask).
GRADWIRE_CPU_INLINE uint32_t StoreSelectedPairs8(uint32_t mask, const uint32_t* idx,
                                                 const float* vals, uint32_t* out, void* vals_out) {
  U32x8 lanes, i8;
  memcpy(&lanes, kCompressTable.lanes[mask], sizeof lanes);
  memcpy(&i8, idx, sizeof i8);
  F32x8 v8;
  memcpy(&v8, vals, sizeof v8);
  const U32x8 picked_idx = __builtin_shuffle(i8, lanes);
  const F32x8 picked_vals = __builtin_shuffle(v8, lanes);
  memcpy(out, &picked_idx, sizeof picked_idx);
  memcpy(vals_out, &picked_vals, sizeof picked_vals);
  return kCompressTable.count[mask];
}

// The expand, StoreSelected8's values in reverse: for each set bit l of
// mask, out[l] = packed[the number of set bits below l]; out[l] = +0 for
// the clear bits. Reads packed[0, 8) (the caller makes sure it may) and
// writes out[0, 8), neither aligned. Returns popcount(mask).
GRADWIRE_CPU_INLINE uint32_t ExpandSelected8(uint32_t mask, const float* packed, float* out) {
  U32x8 lanes;
  for (int l = 0; l < 8; ++l) lanes[l] = kCompressTable.expand[mask][l];
  F32x8 v;
  memcpy(&v, packed, sizeof v);
  const U32x8 bits = {1, 2, 4, 8, 16, 32, 64, 128};
  const U32x8 set = (U32x8)((mask & bits) != 0);
  const U32x8 picked = GRADWIRE_BITCAST(U32x8, __builtin_shuffle(v, lanes)) & set;
  memcpy(out, &picked, sizeof picked);
  return kCompressTable.count[mask];
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_COMPRESS_STORE_H_
