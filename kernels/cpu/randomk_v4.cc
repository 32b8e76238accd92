// Random-k's compress pass and average at sixteen lanes (randomk_wide.h).
#include <string.h>

#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/randomk_wide.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace randomk_v4 {

#if GRADWIRE_CPU_V4_FUNCTIONS
namespace {

// This file's target (GRADWIRE_CPU_V4), as randomk_wide_entry.inc expects it.
#define GRADWIRE_WIDE_TARGET GRADWIRE_CPU_V4
#define GRADWIRE_WIDE_INLINE GRADWIRE_WIDE_TARGET inline __attribute__((always_inline))
GRADWIRE_CPU_V4_BEGIN

// The key and the bound in registers, hoisted out of the loops.
struct Key16 {
  ElementKey16 hash;
  __m512i bound;
};

GRADWIRE_WIDE_INLINE Key16 MakeKey16(const Selected& s) {
  return {MakeElementKey16(s.key), _mm512_set1_epi32(static_cast<int32_t>(s.bound))};
}

// Which of the sixteen indices from `index` (lanes index + 0..15, index a
// multiple of 16) are selected: bitmap bits (kForward false), or
// ElementHash < bound. Lanes at or past n may be set; callers mask them.
template <bool kForward, bool kFull>
GRADWIRE_WIDE_INLINE __mmask16 SelectedLanes(const Selected& s, const Key16& k, uint64_t i,
                                             __m512i index) {
  if (!kForward) return static_cast<__mmask16>(s.bitmap[i >> 6] >> (i & 63));
  return _mm512_cmplt_epu32_mask(ElementHash16<kFull>(k.hash, index), k.bound);
}

GRADWIRE_WIDE_INLINE __mmask16 Live(uint64_t n, uint64_t i) {
  return n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

// ------------------------------------------------------------ the pass --
// Full blocks load and store whole registers; the selected lanes leave by
// a register compress and full-width stores while sixteen outputs remain
// (compress-stores to memory are slow on some cores), masked after.
template <bool kHasResidual, bool kForward, bool kFull>
GRADWIRE_WIDE_INLINE uint64_t PassAs(const float* grad, float* residual, uint64_t n, uint64_t k,
                                     const Selected& s, uint32_t* indices, float* values) {
  const Key16 key = MakeKey16(s);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  __m512i index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  uint64_t j = 0, bad = 0;
  for (uint64_t i = 0; i < n; i += 16) {
    PrefetchAccStreams<kHasResidual>(grad, residual, i);  // prefetch.h
    const __mmask16 live = Live(n, i);
    const bool whole = live == 0xffff;
    __m512 a = whole ? _mm512_loadu_ps(grad + i) : _mm512_maskz_loadu_ps(live, grad + i);
    if (kHasResidual) {
      a = _mm512_add_ps(
          a, whole ? _mm512_loadu_ps(residual + i) : _mm512_maskz_loadu_ps(live, residual + i));
    }
    const __mmask16 finite =
        _mm512_cmplt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(a), abs_mask), inf);
    bad += static_cast<uint64_t>(__builtin_popcount(live & ~finite & 0xffff));
    const __mmask16 sel = live & SelectedLanes<kForward, kFull>(s, key, i, index);
    if (kHasResidual) {
      const __m512 r = _mm512_maskz_mov_ps(finite & ~sel, a);
      if (whole) {
        _mm512_storeu_ps(residual + i, r);
      } else {
        _mm512_mask_storeu_ps(residual + i, live, r);
      }
    }
    if (j + 16 <= k) {
      if (indices != nullptr) {
        _mm512_storeu_si512(indices + j, _mm512_maskz_compress_epi32(sel, index));
      }
      _mm512_storeu_ps(values + j, _mm512_maskz_compress_ps(sel, a));
    } else if (sel != 0) {
      if (indices != nullptr) _mm512_mask_compressstoreu_epi32(indices + j, sel, index);
      _mm512_mask_compressstoreu_ps(values + j, sel, a);
    }
    j += static_cast<uint64_t>(__builtin_popcount(sel));
    index = _mm512_add_epi32(index, _mm512_set1_epi32(16));
  }
  return bad;
}

// --------------------------------------------------------- the average --
// The averages of the next selected entries, formed in the entries' own
// order (contiguous in every payload) kSums at a time into a buffer that
// stays in L1, so that each payload costs one add per sixteen entries and
// the pass over out expands once per block.
constexpr uint64_t kSums = 1024;

// sums[c] = (((+0 + v_0[from + c]) + v_1[..]) + ...) (op) by, c < count.
template <bool kMultiply>
GRADWIRE_WIDE_INLINE void SumEntries(const float* const* values, size_t p, uint64_t from,
                                     uint64_t count, __m512 by, float* sums) {
  for (uint64_t c = 0; c < count; c += 16) {
    const __mmask16 live = count - c >= 16 ? static_cast<__mmask16>(0xffff)
                                           : static_cast<__mmask16>((1u << (count - c)) - 1);
    __m512 sum = _mm512_setzero_ps();
    for (size_t r = 0; r < p; ++r) {
      sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(live, values[r] + from + c));
    }
    _mm512_storeu_ps(sums + c, kMultiply ? _mm512_mul_ps(sum, by) : _mm512_div_ps(sum, by));
  }
}

// Each block's selected lanes take the next averages by one expand; the
// others are +0. Every lane of out is stored once, by ordinary stores:
// streaming ones made a 100 MB average (ResNet-50 at 10 %, 4 payloads)
// 10-25 % slower on a Zen 5 core.
template <bool kForward, bool kFull, bool kMultiply>
GRADWIRE_WIDE_INLINE void AverageAs(const Selected& s, uint64_t n, uint64_t k,
                                    const float* const* values, size_t p, float by, float* out) {
  const Key16 key = MakeKey16(s);
  const __m512 b = _mm512_set1_ps(by);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  alignas(64) float sums[kSums + 16] = {};  // a block may load past the formed ones
  uint64_t formed = 0;                      // entries whose average is formed
  uint64_t at = 0;                          // sums[at] is the next entry's
  uint64_t left = 0;                        // formed, not yet used
  for (uint64_t i = 0; i < n; i += 16) {
    if (left < 16 && formed < k) {
      // Keep what is left at the front; form as many as fit.
      memmove(sums, sums + at, left * sizeof(float));
      const uint64_t more = k - formed < kSums - left ? k - formed : kSums - left;
      SumEntries<kMultiply>(values, p, formed, more, b, sums + left);
      formed += more;
      left += more;
      at = 0;
    }
    const __mmask16 live = Live(n, i);
    const __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(i)), lanes);
    const __mmask16 sel = live & SelectedLanes<kForward, kFull>(s, key, i, index);
    const __m512 q = _mm512_maskz_expand_ps(sel, _mm512_loadu_ps(sums + at));
    if (live == 0xffff) {
      _mm512_storeu_ps(out + i, q);
    } else {
      _mm512_mask_storeu_ps(out + i, live, q);
    }
    const uint64_t count = static_cast<uint64_t>(__builtin_popcount(sel));
    at += count;
    left -= count;
  }
}

}  // namespace

#include "gradwire/kernels/cpu/randomk_wide_entry.inc"

GRADWIRE_CPU_V4_END
#undef GRADWIRE_WIDE_INLINE
#undef GRADWIRE_WIDE_TARGET
#endif  // GRADWIRE_CPU_V4_FUNCTIONS

}  // namespace randomk_v4
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
