#include "gradwire/kernels/cpu/randomk.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// The selection is a bitmap of n bits, plus one: bit n takes the writes of
// the inverse hashes that land outside [0, n), so the marking loop has no
// branch on them.
uint64_t BitmapWords(uint64_t n) { return n / 64 + 1; }

// Sets the bits of the first k indices below n met in the order
// ElementHashInverse(key, 0), (key, 1), ...: the k smallest RandomKKey
// (element_math.h). Requires 0 < k < n. Each index below n is met once
// within [0, 2^bits), so the loops end there at the latest.
template <bool kFull>
GRADWIRE_CPU_INLINE void MarkSelectedAs(const ElementKey& key, uint64_t n, uint64_t k,
                                        uint64_t* bitmap) {
  const uint32_t last = static_cast<uint32_t>(n - 1);
  HashU32x8 v = {0, 1, 2, 3, 4, 5, 6, 7};
  uint32_t lane[8];
  uint64_t found = 0;
  // Eight at a time while all eight may be taken, branch-free.
  while (found + 8 <= k) {
    HashU32x8 x = v;
    ElementHashInverse8<kFull>(key, &x);
    memcpy(lane, &x, sizeof lane);
    for (int l = 0; l < 8; ++l) {
      const bool in = lane[l] <= last;
      const uint64_t at = in ? lane[l] : n;
      bitmap[at >> 6] |= uint64_t{1} << (at & 63);
      found += in ? 1u : 0u;
    }
    v += 8;
  }
  // The last few, in order, exactly up to k.
  while (found < k) {
    HashU32x8 x = v;
    ElementHashInverse8<kFull>(key, &x);
    memcpy(lane, &x, sizeof lane);
    for (int l = 0; l < 8 && found < k; ++l) {
      if (lane[l] > last) continue;
      bitmap[lane[l] >> 6] |= uint64_t{1} << (lane[l] & 63);
      ++found;
    }
    v += 8;
  }
}

GRADWIRE_CPU_CLONES void MarkSelected(const ElementKey& key, uint64_t n, uint64_t k,
                                      uint64_t* bitmap) {
  if (key.bits == 32) {
    MarkSelectedAs<true>(key, n, k, bitmap);
  } else {
    MarkSelectedAs<false>(key, n, k, bitmap);
  }
}

// The selection's bitmap for (seed, step, n, k), 0 <= k <= n.
void SelectBitmap(uint64_t seed, uint64_t step, uint64_t n, uint64_t k, uint64_t* bitmap) {
  const uint64_t words = BitmapWords(n);
  if (k == n) {
    memset(bitmap, 0xff, words * sizeof(uint64_t));  // bits past n are never read
    return;
  }
  memset(bitmap, 0, words * sizeof(uint64_t));
  if (k > 0) MarkSelected(RandomKElementKey(seed, step, n), n, k, bitmap);
}

// The bits of word w of the bitmap that stand for indices below n.
GRADWIRE_CPU_INLINE uint64_t WordBelow(const uint64_t* bitmap, uint64_t w, uint64_t n) {
  const uint64_t left = n - 64 * w;
  return left >= 64 ? bitmap[w] : bitmap[w] & ((uint64_t{1} << left) - 1);
}

// Elements per step of the compress pass: acc of a block is staged on the
// stack, so the element loop runs straight through (and vectorizes), and
// the block's selected elements are then picked out by their bits.
constexpr uint64_t kBlock = 256;

// The one pass over n, in index order: acc = grad + residual; the residual
// becomes acc (0 if not finite: ResidualAfter(acc, 0)) for the unselected
// and ResidualAfter(acc, the value sent) for the selected, whose indices
// and values are written in order. Returns how many acc are not finite.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t CompressPassAs(const float* grad, float* residual, uint64_t n,
                                            const uint64_t* bitmap, ValueFormat format,
                                            uint32_t* indices, uint8_t* values) {
  float acc[kBlock];
  uint64_t nonfinite = 0, j = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    uint32_t bad = 0;
    for (uint64_t i = 0; i < len; ++i) {
      const float a = kHasResidual ? grad[start + i] + residual[start + i] : grad[start + i];
      acc[i] = a;
      const bool finite = IsFinite(a);
      bad += finite ? 0u : 1u;
      if (kHasResidual) residual[start + i] = BitsFloat(SelectBits(finite, FloatBits(a), 0));
    }
    nonfinite += bad;
    for (uint64_t w = 0; w * 64 < len; ++w) {
      for (uint64_t word = WordBelow(bitmap, start / 64 + w, n); word != 0; word &= word - 1) {
        const uint64_t i = 64 * w + static_cast<uint64_t>(__builtin_ctzll(word));
        const float a = acc[i];
        indices[j] = static_cast<uint32_t>(start + i);
        StoreValue(values, j, a, format);
        if (kHasResidual) residual[start + i] = ResidualAfter(a, RoundToFormat(a, format));
        ++j;
      }
    }
  }
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t CompressPass(const float* grad, float* residual, uint64_t n,
                                          const uint64_t* bitmap, ValueFormat format,
                                          uint32_t* indices, uint8_t* values) {
  return residual != nullptr
             ? CompressPassAs<true>(grad, residual, n, bitmap, format, indices, values)
             : CompressPassAs<false>(grad, residual, n, bitmap, format, indices, values);
}

}  // namespace

void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices) {
  if (temp == nullptr) {
    *temp_bytes = BitmapWords(n) * sizeof(uint64_t);
    return;
  }
  uint64_t* bitmap = static_cast<uint64_t*>(temp);
  SelectBitmap(seed, step, n, k, bitmap);
  uint64_t j = 0;
  for (uint64_t w = 0; w * 64 < n; ++w) {
    for (uint64_t word = WordBelow(bitmap, w, n); word != 0; word &= word - 1) {
      indices[j++] = static_cast<uint32_t>(64 * w + static_cast<uint64_t>(__builtin_ctzll(word)));
    }
  }
}

void RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                     uint64_t n, uint64_t k, uint64_t seed, uint64_t step, ValueFormat format,
                     uint32_t* indices, uint8_t* values, FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = BitmapWords(n) * sizeof(uint64_t);
    return;
  }
  // The indices first (O(k) work, no element read), then one pass.
  uint64_t* bitmap = static_cast<uint64_t*>(temp);
  SelectBitmap(seed, step, n, k, bitmap);
  const uint64_t nonfinite = CompressPass(grad, residual, n, bitmap, format, indices, values);
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
