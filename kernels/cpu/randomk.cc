#include "gradwire/kernels/cpu/randomk.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/compress_store.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/randomk_wide.h"

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

// The smallest V such that exactly k indices below n have a key below V
// (0 < k < n): the inverses of 0, 1, 2, ... counted eight lanes at a time,
// the run of 256 that holds the k-th then one by one. V < 2^bits.
template <bool kFull>
GRADWIRE_CPU_INLINE uint32_t KeyBoundAs(const ElementKey& key, uint64_t n, uint64_t k) {
  constexpr uint32_t kRun = 256;  // divides 2^bits
  const uint32_t last = static_cast<uint32_t>(n - 1);
  uint64_t found = 0;
  for (uint32_t base = 0;; base += kRun) {
    HashU32x8 count = {};
    HashU32x8 v = HashU32x8{0, 1, 2, 3, 4, 5, 6, 7} + base;
    for (uint32_t j = 0; j < kRun; j += 8, v += 8) {
      HashU32x8 x = v;
      ElementHashInverse8<kFull>(key, &x);
      count -= (HashU32x8)(x <= last);
    }
    uint64_t c = 0;
    for (int l = 0; l < 8; ++l) c += count[l];
    if (found + c < k) {
      found += c;
      continue;
    }
    for (uint32_t v1 = base;; ++v1) {
      if (ElementHashInverse(key, v1) <= last && ++found == k) return v1 + 1;
    }
  }
}

GRADWIRE_CPU_CLONES uint32_t KeyBound(const ElementKey& key, uint64_t n, uint64_t k) {
  return key.bits == 32 ? KeyBoundAs<true>(key, n, k) : KeyBoundAs<false>(key, n, k);
}

// Denser than 1 in kForwardDensity, and with a bitmap larger than
// kForwardBitmapBytes, the k indices are found by hashing every index
// forward (eight lanes, in the pass over the elements) against KeyBound:
// the bitmap's scattered writes, each a miss in L2, would cost more. A
// bitmap that stays in L2 (n up to 2M) is marked faster (0.2 n inverse
// hashes instead of n hashes): measured at 10 % density, 1M elements,
// about 25 % off both compress and RandomKIndices; at 25.6M the bitmap
// took 1.2-2 times as long.
constexpr uint64_t kForwardDensity = 32;
constexpr uint64_t kForwardBitmapBytes = 256 << 10;

// How a call finds its selection: marked in `bitmap`, or (bitmap null)
// the indices whose key is below `bound`.
using Selection = randomk_wide::Selected;

// The selection for (seed, step, n, k), 0 <= k <= n; `temp` holds the
// bitmap.
Selection Select(void* temp, uint64_t seed, uint64_t step, uint64_t n, uint64_t k) {
  Selection s;
  s.key = RandomKElementKey(seed, step, n);
  if (k > 0 && k < n && k * kForwardDensity > n &&
      BitmapWords(n) * sizeof(uint64_t) > kForwardBitmapBytes) {
    s.bound = KeyBound(s.key, n, k);
    return s;
  }
  uint64_t* bitmap = static_cast<uint64_t*>(temp);
  s.bitmap = bitmap;
  const uint64_t words = BitmapWords(n);
  if (k == n) {
    memset(bitmap, 0xff, words * sizeof(uint64_t));  // bits past n are never read
    return s;
  }
  memset(bitmap, 0, words * sizeof(uint64_t));
  if (k > 0) MarkSelected(s.key, n, k, bitmap);
  return s;
}

// The bits of word w of the bitmap that stand for indices below n.
GRADWIRE_CPU_INLINE uint64_t WordBelow(const uint64_t* bitmap, uint64_t w, uint64_t n) {
  const uint64_t left = n - 64 * w;
  return left >= 64 ? bitmap[w] : bitmap[w] & ((uint64_t{1} << left) - 1);
}

// Elements per step of the passes below: a block's keys (forward) and acc
// are staged on the stack, so the element loops run straight through (and
// vectorize), and the block's selected elements are then picked out by
// their bits.
constexpr uint64_t kBlock = 256;
constexpr uint64_t kBlockWords = kBlock / 64;

// The selection bits of elements [start, start + len), len <= kBlock, one
// word per 64 (the unused high bits zero).
template <bool kForward>
GRADWIRE_CPU_INLINE void BlockWords(const Selection& s, uint64_t n, uint64_t start, uint64_t len,
                                    uint64_t* words) {
  if (!kForward) {
    for (uint64_t w = 0; w < kBlockWords; ++w) {
      words[w] = 64 * w < len ? WordBelow(s.bitmap, start / 64 + w, n) : 0;
    }
    return;
  }
  uint32_t hash[kBlock];
  HashRun<false>(s.key, start, len, hash);
  uint8_t flags[kBlock];
  for (uint64_t i = 0; i < len; ++i) flags[i] = hash[i] < s.bound ? 1 : 0;
  memset(flags + len, 0, kBlock - len);
  for (uint64_t w = 0; w < kBlockWords; ++w) {
    uint64_t mask = 0;
    for (int b = 0; b < 8; ++b) {
      // Bytes b0..b7 (0 or 1) to the bits of one byte: the product puts
      // b_e at bit 56 + e, everything else below bit 56 without carries,
      // or above bit 63.
      const uint64_t bytes = LoadLe<uint64_t>(flags + 64 * w + 8 * b);
      mask |= ((bytes * 0x0102040810204080ull) >> 56) << (8 * b);
    }
    words[w] = mask;
  }
}

template <bool kForward>
GRADWIRE_CPU_INLINE void EmitIndicesAs(const Selection& s, uint64_t n, uint64_t k,
                                       uint32_t* indices) {
  // Sparser than 1 in 16, most bytes of a word are empty: walk the bits.
  const bool dense = k * 16 > n;
  uint64_t j = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    uint64_t words[kBlockWords];
    BlockWords<kForward>(s, n, start, len, words);
    for (uint64_t w = 0; w < kBlockWords; ++w) {
      if (dense && j + 64 <= k) {
        // Room for eight lanes past each of the word's eight stores.
        const uint32_t base = static_cast<uint32_t>(start + 64 * w);
        for (uint32_t b = 0; b < 8; ++b) {
          j += StoreSetBits8((words[w] >> (8 * b)) & 0xff, base + 8 * b, indices + j);
        }
        continue;
      }
      for (uint64_t word = words[w]; word != 0; word &= word - 1) {
        indices[j++] =
            static_cast<uint32_t>(start + 64 * w + static_cast<uint64_t>(__builtin_ctzll(word)));
      }
    }
  }
}

GRADWIRE_CPU_CLONES void EmitIndices(const Selection& s, uint64_t n, uint64_t k,
                                     uint32_t* indices) {
  if (s.bitmap == nullptr) {
    EmitIndicesAs<true>(s, n, k, indices);
  } else {
    EmitIndicesAs<false>(s, n, k, indices);
  }
}

// The one pass over n, in index order: acc = grad + residual; the residual
// becomes acc (0 if not finite: ResidualAfter(acc, 0)) for the unselected
// and ResidualAfter(acc, the value sent) for the selected, whose indices
// (unless `indices` is null) and values are written in order. Returns how
// many acc are not finite.
template <bool kHasResidual, bool kForward>
GRADWIRE_CPU_INLINE uint64_t CompressPassAs(const float* grad, float* residual, uint64_t n,
                                            const Selection& s, ValueFormat format,
                                            uint32_t* indices, uint8_t* values) {
  float acc[kBlock];
  uint64_t nonfinite = 0, j = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    uint64_t words[kBlockWords];
    BlockWords<kForward>(s, n, start, len, words);
    uint32_t bad = 0;
    for (uint64_t i = 0; i < len; ++i) {
      const float a = kHasResidual ? grad[start + i] + residual[start + i] : grad[start + i];
      acc[i] = a;
      const bool finite = IsFinite(a);
      bad += finite ? 0u : 1u;
      if (kHasResidual) residual[start + i] = BitsFloat(SelectBits(finite, FloatBits(a), 0));
    }
    nonfinite += bad;
    for (uint64_t w = 0; w < kBlockWords; ++w) {
      for (uint64_t word = words[w]; word != 0; word &= word - 1) {
        const uint64_t i = 64 * w + static_cast<uint64_t>(__builtin_ctzll(word));
        const float a = acc[i];
        if (indices != nullptr) indices[j] = static_cast<uint32_t>(start + i);
        StoreValue(values, j, a, format);
        if (kHasResidual) residual[start + i] = ResidualAfter(a, RoundToFormat(a, format));
        ++j;
      }
    }
  }
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t CompressPass(const float* grad, float* residual, uint64_t n,
                                          const Selection& s, ValueFormat format, uint32_t* indices,
                                          uint8_t* values) {
  const bool forward = s.bitmap == nullptr;
  if (residual != nullptr) {
    return forward ? CompressPassAs<true, true>(grad, residual, n, s, format, indices, values)
                   : CompressPassAs<true, false>(grad, residual, n, s, format, indices, values);
  }
  return forward ? CompressPassAs<false, true>(grad, residual, n, s, format, indices, values)
                 : CompressPassAs<false, false>(grad, residual, n, s, format, indices, values);
}

// The average (RandomKDecodeAverage) a block at a time: the block's
// entries' averages formed first, contiguous in every payload (sums in
// payload order from +0, then divided: by a multiply when the reciprocal
// is exact, the same bits), so that those loops run across entries and
// vectorize; then each average stored where its bit is and the rest of
// the block +0 (a whole block eight elements at a time, by expands).
template <bool kForward, ValueFormat kFormat>
GRADWIRE_CPU_INLINE void AverageAs(const Selection& s, uint64_t n, const uint8_t* const* values,
                                   size_t p, float divisor, float* out) {
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
  uint64_t j = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    uint64_t words[kBlockWords];
    BlockWords<kForward>(s, n, start, len, words);
    uint64_t count = 0;
    for (uint64_t w = 0; w < kBlockWords; ++w) count += __builtin_popcountll(words[w]);
    float sums[kBlock + 8];  // an expand may read past count
    for (uint64_t e = 0; e < count + 8; ++e) sums[e] = 0.0f;
    for (size_t r = 0; r < p; ++r) {
      for (uint64_t e = 0; e < count; ++e) sums[e] += LoadValue(values[r], j + e, kFormat);
    }
    if (multiply) {
      for (uint64_t e = 0; e < count; ++e) sums[e] *= reciprocal;
    } else {
      for (uint64_t e = 0; e < count; ++e) sums[e] /= divisor;
    }
    float* o = out + start;
    uint64_t e = 0;
    if (len == kBlock) {
      // Eight elements at a time, branch-free (ExpandSelected8): a walk
      // over the set bits mispredicts the end of nearly every byte at 10 %.
      for (uint64_t b = 0; b < kBlock / 8; ++b) {
        const uint32_t mask = static_cast<uint32_t>(words[b / 8] >> (8 * (b % 8))) & 0xffu;
        e += ExpandSelected8(mask, sums + e, o + 8 * b);
      }
      j += count;
      continue;
    }
    for (uint64_t i = 0; i < len; ++i) o[i] = 0.0f;
    for (uint64_t w = 0; w < kBlockWords; ++w) {
      for (uint64_t word = words[w]; word != 0; word &= word - 1) {
        o[64 * w + static_cast<uint64_t>(__builtin_ctzll(word))] = sums[e++];
      }
    }
    j += count;
  }
}

template <bool kForward>
GRADWIRE_CPU_INLINE void AverageIn(const Selection& s, uint64_t n, const uint8_t* const* values,
                                   size_t p, ValueFormat format, float divisor, float* out) {
  switch (format) {
    case ValueFormat::kFp16:
      return AverageAs<kForward, ValueFormat::kFp16>(s, n, values, p, divisor, out);
    case ValueFormat::kBf16:
      return AverageAs<kForward, ValueFormat::kBf16>(s, n, values, p, divisor, out);
    default:
      return AverageAs<kForward, ValueFormat::kFp32>(s, n, values, p, divisor, out);
  }
}

GRADWIRE_CPU_CLONES void Average(const Selection& s, uint64_t n, const uint8_t* const* values,
                                 size_t p, ValueFormat format, float divisor, float* out) {
  if (s.bitmap == nullptr) {
    AverageIn<true>(s, n, values, p, format, divisor, out);
  } else {
    AverageIn<false>(s, n, values, p, format, divisor, out);
  }
}

// CompressPass by the widest loop this CPU runs (fp32 values: the
// x86-64-v4 or -v3 one where the CPU has it).
uint64_t WidestCompressPass(const float* grad, float* residual, uint64_t n, uint64_t k,
                            const Selection& s, ValueFormat format, uint32_t* indices,
                            uint8_t* values) {
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (format == ValueFormat::kFp32 && CpuIsX86V4()) {
    return randomk_v4::CompressPass(grad, residual, n, k, s, indices,
                                    reinterpret_cast<float*>(values));
  }
#endif
#if GRADWIRE_CPU_V3_FUNCTIONS
  if (format == ValueFormat::kFp32 && CpuIsX86V3()) {
    return randomk_v3::CompressPass(grad, residual, n, k, s, indices,
                                    reinterpret_cast<float*>(values));
  }
#endif
  return CompressPass(grad, residual, n, s, format, indices, values);
}

}  // namespace

void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices) {
  if (temp == nullptr) {
    *temp_bytes = BitmapWords(n) * sizeof(uint64_t);
    return;
  }
  EmitIndices(Select(temp, seed, step, n, k), n, k, indices);
}

void RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                     uint64_t n, uint64_t k, uint64_t seed, uint64_t step, ValueFormat format,
                     uint32_t* indices, uint8_t* values, FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = BitmapWords(n) * sizeof(uint64_t);
    return;
  }
  // The selection first (O(k) inverse hashes, no element read), then one
  // pass over the elements.
  const Selection s = Select(temp, seed, step, n, k);
  const uint64_t nonfinite = WidestCompressPass(grad, residual, n, k, s, format, indices, values);
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

void RandomKDecodeAverage(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                          uint64_t n, uint64_t k, const uint8_t* const* values, size_t p,
                          ValueFormat format, float divisor, float* out) {
  if (temp == nullptr) {
    *temp_bytes = BitmapWords(n) * sizeof(uint64_t);
    return;
  }
  const Selection s = Select(temp, seed, step, n, k);
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (format == ValueFormat::kFp32 && CpuIsX86V4()) {
    randomk_v4::DecodeAverage(s, n, k, reinterpret_cast<const float* const*>(values), p, divisor,
                              out);
    return;
  }
#endif
#if GRADWIRE_CPU_V3_FUNCTIONS
  if (format == ValueFormat::kFp32 && CpuIsX86V3()) {
    randomk_v3::DecodeAverage(s, n, k, reinterpret_cast<const float* const*>(values), p, divisor,
                              out);
    return;
  }
#endif
  Average(s, n, values, p, format, divisor, out);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
