// Random-k's compress pass and average at eight lanes (randomk_wide.h).
#include <string.h>

#include "gradwire/kernels/cpu/compress_store.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/randomk_wide.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace randomk_v3 {

#if GRADWIRE_CPU_V3_FUNCTIONS
namespace {

// This file's target (GRADWIRE_CPU_V3), as randomk_wide_entry.inc expects it.
#define GRADWIRE_WIDE_TARGET GRADWIRE_CPU_V3
#define GRADWIRE_WIDE_INLINE GRADWIRE_WIDE_TARGET inline __attribute__((always_inline))

// The key and the bound (sign-flipped, for an unsigned compare by a signed
// one) in registers, hoisted out of the loops.
struct Key8 {
  ElementKey8 hash;
  __m256i bound;
};

GRADWIRE_WIDE_INLINE __m256i Flip(__m256i x) {
  return _mm256_xor_si256(x, _mm256_set1_epi32(INT32_MIN));
}

GRADWIRE_WIDE_INLINE Key8 MakeKey8(const Selected& s) {
  return {MakeElementKey8(s.key), Flip(_mm256_set1_epi32(static_cast<int32_t>(s.bound)))};
}

GRADWIRE_WIDE_INLINE uint32_t MaskOf(__m256i compare) {
  return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(compare)));
}

// Which of the eight indices from `index` (lanes i + 0..7, i a multiple of
// 8) are selected: bitmap bits (kForward false), or ElementHash < bound;
// as lanes of all ones, and as the eight bits of *mask. (The hash's
// compare is both at once; bitmap bits are spread to lanes by a compare.
// Spreading the compare's movemask back to lanes, as before, cost 8-10 %
// of the pass and the average at 10 % on a Zen 3 core.)
template <bool kForward, bool kFull>
GRADWIRE_WIDE_INLINE __m256i SelectedLanes(const Selected& s, const Key8& k, uint64_t i,
                                           __m256i index, uint32_t* mask) {
  if (kForward) {
    const __m256i lanes = _mm256_cmpgt_epi32(k.bound, Flip(ElementHashV3<kFull>(k.hash, index)));
    *mask = MaskOf(lanes);
    return lanes;
  }
  *mask = static_cast<uint32_t>(s.bitmap[i >> 6] >> (i & 63)) & 0xffu;
  const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(
      _mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(*mask)), bits), bits);
}

// SelectedLanes of the four groups from i (kForward), their hashes
// formed together (ElementHashesV3).
template <bool kFull>
GRADWIRE_WIDE_INLINE void SelectedLanes4(const Key8& k, uint64_t i, __m256i lanes[4],
                                         uint32_t mask[4]) {
  const __m256i first = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(i)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i x[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) x[g] = _mm256_add_epi32(first, _mm256_set1_epi32(8 * g));
  ElementHashesV3<kFull, 4>(k.hash, x);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    lanes[g] = _mm256_cmpgt_epi32(k.bound, Flip(x[g]));
    mask[g] = MaskOf(lanes[g]);
  }
}

// One element the scalar way (the last n % 8): selected or not.
template <bool kForward>
GRADWIRE_WIDE_INLINE bool SelectedOne(const Selected& s, uint64_t i) {
  if (!kForward) return ((s.bitmap[i >> 6] >> (i & 63)) & 1) != 0;
  return ElementHash(s.key, i) < s.bound;
}

// ------------------------------------------------------------ the pass --
// Whole groups of eight load and store whole registers; the selected
// lanes leave by a permute and full-width stores while eight outputs
// remain, one by one after.
struct PassState {
  uint64_t j = 0;  // entries written
  // Per lane, how many acc were finite (each compare's -1 subtracted).
  __m256i finite_count;
};

// The group of elements [i, i + 8), whose selection is `chosen` (lanes)
// and `sel` (bits).
template <bool kHasResidual>
GRADWIRE_WIDE_INLINE void PassGroup(const float* grad, float* residual, uint64_t k, uint64_t i,
                                    __m256i chosen, uint32_t sel, uint32_t* indices,
                                    float* values, PassState* p) {
  if (i % 16 == 0) PrefetchAccStreams<kHasResidual>(grad, residual, i);  // prefetch.h
  __m256 a = _mm256_loadu_ps(grad + i);
  if (kHasResidual) a = _mm256_add_ps(a, _mm256_loadu_ps(residual + i));
  const __m256i finite = _mm256_cmpgt_epi32(
      _mm256_set1_epi32(0x7f800000),
      _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7fffffff)));
  p->finite_count = _mm256_sub_epi32(p->finite_count, finite);
  if (kHasResidual) {
    // acc for the unselected finite, +0 for the rest.
    _mm256_storeu_ps(residual + i,
                     _mm256_and_ps(_mm256_castsi256_ps(_mm256_andnot_si256(chosen, finite)), a));
  }
  const uint64_t j = p->j;
  if (j + 8 <= k) {
    const __m256i lanes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kCompressTable.lanes[sel]));
    if (indices != nullptr) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(indices + j),
                          _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(i))));
    }
    _mm256_storeu_ps(values + j, _mm256_permutevar8x32_ps(a, lanes));
  } else {
    float lane[8];
    _mm256_storeu_ps(lane, a);
    uint64_t o = j;
    for (uint32_t b = sel; b != 0; b &= b - 1, ++o) {
      const int l = __builtin_ctz(b);
      if (indices != nullptr) indices[o] = static_cast<uint32_t>(i) + static_cast<uint32_t>(l);
      values[o] = lane[l];
    }
  }
  p->j = j + static_cast<uint64_t>(__builtin_popcount(sel));
}

template <bool kHasResidual, bool kForward, bool kFull>
GRADWIRE_WIDE_INLINE uint64_t PassAs(const float* grad, float* residual, uint64_t n, uint64_t k,
                                     const Selected& s, uint32_t* indices, float* values) {
  const Key8 key = MakeKey8(s);
  const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  PassState p;
  p.finite_count = _mm256_setzero_si256();
  uint64_t i = 0;
  if (kForward) {
    for (; i + 32 <= n; i += 32) {
      __m256i chosen[4];
      uint32_t sel[4];
      SelectedLanes4<kFull>(key, i, chosen, sel);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        PassGroup<kHasResidual>(grad, residual, k, i + 8 * g, chosen[g], sel[g], indices, values,
                                &p);
      }
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(i)), lane_ids);
    uint32_t sel;
    const __m256i chosen = SelectedLanes<kForward, kFull>(s, key, i, index, &sel);
    PassGroup<kHasResidual>(grad, residual, k, i, chosen, sel, indices, values, &p);
  }
  // The groups' non-finite count: i less the finite, each lane's count at
  // most n / 8 < 2^32 (n < 2^32: uint32_t indices).
  alignas(32) uint32_t finite_lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(finite_lanes), p.finite_count);
  uint64_t bad = i;
  for (const uint32_t c : finite_lanes) bad -= c;
  uint64_t j = p.j;
  for (; i < n; ++i) {
    float a = grad[i];
    if (kHasResidual) a = grad[i] + residual[i];
    const bool finite = IsFinite(a);
    bad += finite ? 0u : 1u;
    const bool sel = SelectedOne<kForward>(s, i);
    if (kHasResidual) residual[i] = finite && !sel ? a : 0.0f;
    if (sel) {
      if (indices != nullptr) indices[j] = static_cast<uint32_t>(i);
      values[j] = a;
      ++j;
    }
  }
  return bad;
}

// --------------------------------------------------------- the average --
// As randomk_v4.cc's: the averages of the next selected entries formed
// in the entries' order kSums at a time in a buffer that stays in L1,
// then each group of eight takes its share by one expand (a permute by
// compress_store.h's expand table, the clear lanes +0).
constexpr uint64_t kSums = 1024;

// sums[c] = (((+0 + v_0[from + c]) + v_1[..]) + ...) (op) by, c < count.
template <bool kMultiply>
GRADWIRE_WIDE_INLINE void SumEntries(const float* const* values, size_t p, uint64_t from,
                                     uint64_t count, float by, float* sums) {
  const __m256 b = _mm256_set1_ps(by);
  uint64_t c = 0;
  for (; c + 8 <= count; c += 8) {
    __m256 sum = _mm256_setzero_ps();
    for (size_t r = 0; r < p; ++r) sum = _mm256_add_ps(sum, _mm256_loadu_ps(values[r] + from + c));
    _mm256_storeu_ps(sums + c, kMultiply ? _mm256_mul_ps(sum, b) : _mm256_div_ps(sum, b));
  }
  for (; c < count; ++c) {
    float sum = 0.0f;
    for (size_t r = 0; r < p; ++r) sum += values[r][from + c];
    sums[c] = kMultiply ? sum * by : sum / by;
  }
}

// Where the averages stand: sums[at, at + left) formed and not yet used;
// `formed` of the k entries formed. (Kept apart from the sums, whose
// address goes to memmove, so that they stay in registers: inside one
// struct the bitmap path's average was 5-20 % slower at 1M.)
struct Formed {
  uint64_t formed = 0;
  uint64_t at = 0;
  uint64_t left = 0;
};

// While fewer than `want` are left and more remain, keeps what is left at
// the front and forms as many as fit.
template <bool kMultiply>
GRADWIRE_WIDE_INLINE void Refill(const float* const* values, size_t p, uint64_t k, float by,
                                 uint64_t want, float* sums, Formed* f) {
  if (f->left >= want || f->formed >= k) return;
  memmove(sums, sums + f->at, f->left * sizeof(float));
  const uint64_t more = k - f->formed < kSums - f->left ? k - f->formed : kSums - f->left;
  SumEntries<kMultiply>(values, p, f->formed, more, by, sums + f->left);
  f->formed += more;
  f->left += more;
  f->at = 0;
}

// out[i, i + 8) from the group's selection (`set` lanes, `sel` bits).
GRADWIRE_WIDE_INLINE void ExpandGroup(__m256i set, uint32_t sel, const float* sums, float* out,
                                      Formed* f) {
  uint64_t expand_lanes;
  memcpy(&expand_lanes, kCompressTable.expand[sel], sizeof expand_lanes);
  const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(expand_lanes)));
  _mm256_storeu_ps(out, _mm256_and_ps(_mm256_castsi256_ps(set),
                                      _mm256_permutevar8x32_ps(_mm256_loadu_ps(sums + f->at),
                                                               perm)));
  const uint64_t count = static_cast<uint64_t>(__builtin_popcount(sel));
  f->at += count;
  f->left -= count;
}

template <bool kForward, bool kFull, bool kMultiply>
GRADWIRE_WIDE_INLINE void AverageAs(const Selected& s, uint64_t n, uint64_t k,
                                    const float* const* values, size_t p, float by, float* out) {
  const Key8 key = MakeKey8(s);
  const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  alignas(32) float sums[kSums + 8] = {};  // a group may load past the formed ones
  Formed f;
  uint64_t i = 0;
  if (kForward) {
    for (; i + 32 <= n; i += 32) {
      Refill<kMultiply>(values, p, k, by, 32, sums, &f);
      __m256i set[4];
      uint32_t sel[4];
      SelectedLanes4<kFull>(key, i, set, sel);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) ExpandGroup(set[g], sel[g], sums, out + i + 8 * g, &f);
    }
  }
  for (; i + 8 <= n; i += 8) {
    Refill<kMultiply>(values, p, k, by, 8, sums, &f);
    const __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(i)), lane_ids);
    uint32_t sel;
    const __m256i set = SelectedLanes<kForward, kFull>(s, key, i, index, &sel);
    ExpandGroup(set, sel, sums, out + i, &f);
  }
  // The last n % 8: one by one.
  Refill<kMultiply>(values, p, k, by, 8, sums, &f);
  for (; i < n; ++i) out[i] = SelectedOne<kForward>(s, i) ? sums[f.at++] : 0.0f;
}

}  // namespace

#include "gradwire/kernels/cpu/randomk_wide_entry.inc"

#undef GRADWIRE_WIDE_INLINE
#undef GRADWIRE_WIDE_TARGET
#endif  // GRADWIRE_CPU_V3_FUNCTIONS

}  // namespace randomk_v3
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
