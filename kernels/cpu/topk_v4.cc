// Top-k's pass and emit at sixteen lanes (topk_wide.h).
#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/topk_wide.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace topk_v4 {

#if GRADWIRE_CPU_V4_FUNCTIONS
namespace {

// This file's target (GRADWIRE_CPU_V4), as topk_wide_entry.inc expects it.
#define GRADWIRE_WIDE_TARGET GRADWIRE_CPU_V4
#define GRADWIRE_WIDE_INLINE GRADWIRE_WIDE_TARGET inline __attribute__((always_inline))
GRADWIRE_CPU_V4_BEGIN

// |bits| of sixteen floats.
GRADWIRE_WIDE_INLINE __m512i AbsBits(__m512 a) {
  return _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff));
}

// MagnitudeKey from AbsBits: NaN -> 0, else |bits| + 1 (< 2^31, so signed
// compares order them).
GRADWIRE_WIDE_INLINE __m512i KeysOfAbs(__m512i abs) {
  return _mm512_maskz_add_epi32(_mm512_cmple_epi32_mask(abs, _mm512_set1_epi32(0x7f800000)), abs,
                                _mm512_set1_epi32(1));
}

// ------------------------------------------------------------ the pass --
// The block's candidates leave by a register compress and two
// full-width stores, with no branch on whether any passed (at 10 %
// density most blocks hold one, unpredictably). The stores' lanes past
// the count stay inside the lists (m <= i, and the lists hold n entries);
// the last, partial block uses masked loads and compress-stores.
template <bool kHasResidual, bool kZero, bool kFull>
GRADWIRE_WIDE_INLINE void CollectBlock(const float* grad, float* residual, uint64_t i,
                                       __mmask16 live, __m512i index, __m512i lower,
                                       __m512i zero_from, uint32_t* candidates,
                                       float* candidate_values, uint64_t* m, uint64_t* bad) {
  __m512 a = _mm512_maskz_loadu_ps(live, grad + i);
  if (kHasResidual) a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(live, residual + i));
  const __m512i abs = AbsBits(a);
  *bad += static_cast<uint64_t>(
      __builtin_popcount(_mm512_mask_cmpge_epi32_mask(live, abs, _mm512_set1_epi32(0x7f800000))));
  const __m512i keys = KeysOfAbs(abs);
  const __mmask16 pass = _mm512_mask_cmpge_epi32_mask(live, keys, lower);
  if (kZero) {
    const __mmask16 zero = _mm512_cmpge_epi32_mask(keys, zero_from);
    _mm512_mask_storeu_ps(residual + i, live, _mm512_maskz_mov_ps(~zero, a));
  } else if (kHasResidual) {
    _mm512_mask_storeu_ps(residual + i, live, a);
  }
  if (kFull) {
    _mm512_storeu_si512(candidates + *m, _mm512_maskz_compress_epi32(pass, index));
    _mm512_storeu_ps(candidate_values + *m, _mm512_maskz_compress_ps(pass, a));
  } else {
    _mm512_mask_compressstoreu_epi32(candidates + *m, pass, index);
    _mm512_mask_compressstoreu_ps(candidate_values + *m, pass, a);
  }
  *m += static_cast<uint64_t>(__builtin_popcount(pass));
}

// Elements [begin, end) (begin a multiple of sixteen), appending to the
// m candidates already in the lists; returns the new count and adds the
// non-finite acc to *nonfinite. guess.before is a multiple of
// internal::kGuessBlock, so of sixteen: one key floor (ZeroGuess::FloorAt)
// serves each block.
template <bool kHasResidual, bool kZero>
GRADWIRE_WIDE_INLINE uint64_t Collect(const float* grad, float* residual, uint64_t begin,
                                      uint64_t end, uint32_t lower,
                                      const internal::ZeroGuess& guess, uint32_t* candidates,
                                      float* candidate_values, uint64_t m, uint64_t* nonfinite) {
  static_assert(internal::kGuessBlock % 16 == 0, "a block of sixteen is on one side of before");
  const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(lower));
  __m512i index =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(begin)),
                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  uint64_t bad = 0, i = begin;
  for (; i + 16 <= end; i += 16) {
    PrefetchAccStreams<kHasResidual>(grad, residual, i);  // prefetch.h
    CollectBlock<kHasResidual, kZero, true>(
        grad, residual, i, 0xffff, index, lo,
        _mm512_set1_epi32(static_cast<int32_t>(guess.FloorAt(i))), candidates, candidate_values, &m,
        &bad);
    index = _mm512_add_epi32(index, _mm512_set1_epi32(16));
  }
  if (i < end) {
    CollectBlock<kHasResidual, kZero, false>(
        grad, residual, i, static_cast<__mmask16>((1u << (end - i)) - 1), index, lo,
        _mm512_set1_epi32(static_cast<int32_t>(guess.FloorAt(i))), candidates, candidate_values, &m,
        &bad);
  }
  *nonfinite += bad;
  return m;
}

// ------------------------------------------------------------ the emit --
// Sixteen candidates at a time: ranks, the two masks, the selection rule
// (internal::TakeMask), the residual stores, bit by bit, for the
// candidates whose residual changes: with `zeroed`, the ones the
// selection decided against the pass's guess (internal::ZeroGuess), the
// taken ones otherwise; then a compress into the outputs (full-width
// stores while sixteen outputs remain, masked ones after), which may be
// the candidate lists themselves (topk.cc's EmitSelectedAs). No prefetch of
// those residual lines: fetching them 64 candidates early (all, or only
// the ones to be written) made top-k 10 % at 1M 5-10 % slower and
// approximate top-k 15-20 %, on a Zen 5 core with caches cold.
template <ValueFormat kFormat, bool kHasResidual, uint32_t kShift>
GRADWIRE_WIDE_INLINE void EmitAs(const internal::SelectTemp& t, uint64_t m, uint64_t k,
                                 uint32_t cut, uint64_t take_equal, bool zeroed,
                                 const internal::ZeroGuess& guess, float* residual,
                                 uint32_t* indices, uint8_t* values) {
  const float* vals = t.candidate_values;
  const uint32_t* cands = t.candidates;
  const __m512i icut = _mm512_set1_epi32(static_cast<int32_t>(cut));
  const __m512i from = _mm512_set1_epi32(static_cast<int32_t>(guess.from));
  const __m512i band = _mm512_set1_epi32(static_cast<int32_t>(guess.band));
  const __m512i before = _mm512_set1_epi32(static_cast<int32_t>(guess.before));
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t c = 0; c < m; c += 16) {
    const uint64_t lanes = m - c < 16 ? m - c : 16;
    const __mmask16 live = static_cast<__mmask16>((1u << lanes) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, vals + c);
    const __m512i idx = _mm512_maskz_loadu_epi32(live, cands + c);
    const __m512i keys = KeysOfAbs(AbsBits(v));
    const __m512i ranks = _mm512_srli_epi32(keys, static_cast<int>(kShift));
    const uint32_t above = _mm512_mask_cmpgt_epi32_mask(live, ranks, icut);
    const uint32_t equal = _mm512_mask_cmpeq_epi32_mask(live, ranks, icut);
    uint32_t take = internal::TakeMask(above, equal, take_equal, &taken_equal);
    // Never more than k (the threshold guarantees it; the outputs hold k).
    while (j + static_cast<uint64_t>(__builtin_popcount(take)) > k) {
      take &= ~(1u << (31 - __builtin_clz(take)));
    }
    if (kHasResidual) {
      // The pass wrote 0 where it guessed (with `zeroed`).
      uint32_t zero = 0;
      if (zeroed) {
        const __mmask16 early = _mm512_cmplt_epu32_mask(idx, before);
        zero = _mm512_mask_cmpge_epi32_mask(live, keys, _mm512_mask_blend_epi32(early, from, band));
      }
      internal::SettleResiduals<kFormat>(take, zero, zeroed, cands + c, vals + c, residual);
    }
    const __mmask16 tk = static_cast<__mmask16>(take);
    const uint64_t count = static_cast<uint64_t>(__builtin_popcount(take));
    if (j + 16 <= k) {
      _mm512_storeu_si512(indices + j, _mm512_maskz_compress_epi32(tk, idx));
    } else {
      _mm512_mask_compressstoreu_epi32(indices + j, tk, idx);
    }
    if (kFormat == ValueFormat::kFp32) {
      if (j + 16 <= k) {
        _mm512_storeu_ps(values + 4 * j, _mm512_maskz_compress_ps(tk, v));
      } else {
        _mm512_mask_compressstoreu_ps(values + 4 * j, tk, v);
      }
    } else {
      uint64_t o = j;
      for (uint32_t b = take; b != 0; b &= b - 1, ++o) {
        StoreValue(values, o, vals[c + __builtin_ctz(b)], kFormat);
      }
    }
    j += count;
  }
}

}  // namespace

#include "gradwire/kernels/cpu/topk_wide_entry.inc"

GRADWIRE_CPU_V4_END
#undef GRADWIRE_WIDE_INLINE
#undef GRADWIRE_WIDE_TARGET
#endif  // GRADWIRE_CPU_V4_FUNCTIONS

}  // namespace topk_v4
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
