// Top-k's pass and emit at eight lanes with AVX2 intrinsics (topk_wide.h).
#include "gradwire/kernels/cpu/compress_store.h"
#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/topk_wide.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace topk_v3 {

#if GRADWIRE_CPU_V3_FUNCTIONS
namespace {

// This file's target (GRADWIRE_CPU_V3), as topk_wide_entry.inc expects it.
#define GRADWIRE_WIDE_TARGET GRADWIRE_CPU_V3
#define GRADWIRE_WIDE_INLINE GRADWIRE_WIDE_TARGET inline __attribute__((always_inline))

// MagnitudeKey of eight floats' bits: NaN -> 0, else |bits| + 1 (< 2^31,
// so signed compares order them). *abs receives |bits|.
GRADWIRE_WIDE_INLINE __m256i Keys(__m256 a, __m256i* abs) {
  *abs = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(*abs, _mm256_set1_epi32(0x7f800000));
  return _mm256_andnot_si256(nan, _mm256_add_epi32(*abs, _mm256_set1_epi32(1)));
}

// Bit l set iff lane l of x >= lane l of y (signed), for all eight lanes.
GRADWIRE_WIDE_INLINE uint32_t AtLeast(__m256i x, __m256i y) {
  return ~static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(y, x)))) &
         0xffu;
}

// The set bits of `mask` (< 256), ascending, as permute lanes.
GRADWIRE_WIDE_INLINE __m256i Lanes(uint32_t mask) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kCompressTable.lanes[mask]));
}

// ------------------------------------------------------------ the pass --
// Eight elements a step with no branch on whether any passed (at 10 %
// density most groups hold one, unpredictably): the candidates leave by
// two table-driven permutes and two full-width stores, whose lanes past
// the count stay inside the lists (m <= i, and the lists hold n entries).
// Elements [begin, end) (begin a multiple of eight), appending to the m
// candidates already in the lists; returns the new count and adds the
// non-finite acc to *nonfinite. The last (end - begin) % 8 elements take
// ScanBlock's scalar rule.
template <bool kHasResidual, bool kZero>
GRADWIRE_WIDE_INLINE uint64_t Collect(const float* grad, float* residual, uint64_t begin,
                                      uint64_t end, uint32_t lower,
                                      const internal::ZeroGuess& guess, uint32_t* candidates,
                                      float* candidate_values, uint64_t m, uint64_t* nonfinite) {
  static_assert(internal::kGuessBlock % 8 == 0, "a group of eight is on one side of before");
  const int32_t lo = static_cast<int32_t>(lower);
  const __m256i lower8 = _mm256_set1_epi32(lo);
  const __m256i finite_max = _mm256_set1_epi32(0x7f7fffff);
  uint64_t bad = 0, i = begin;
  for (; i + 8 <= end; i += 8) {
    if (i % 16 == 0) PrefetchAccStreams<kHasResidual>(grad, residual, i);  // prefetch.h
    __m256 a = _mm256_loadu_ps(grad + i);
    if (kHasResidual) a = _mm256_add_ps(a, _mm256_loadu_ps(residual + i));
    __m256i abs;
    const __m256i keys = Keys(a, &abs);
    bad += static_cast<uint64_t>(__builtin_popcount(static_cast<uint32_t>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(abs, finite_max))))));
    const uint32_t pass = AtLeast(keys, lower8);
    if (kZero) {
      // Kept (acc) below the block's floor, +0 from it on.
      const __m256i floor = _mm256_set1_epi32(static_cast<int32_t>(guess.FloorAt(i)));
      const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(floor, keys));
      _mm256_storeu_ps(residual + i, _mm256_and_ps(keep, a));
    } else if (kHasResidual) {
      _mm256_storeu_ps(residual + i, a);
    }
    const __m256i lanes = Lanes(pass);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(candidates + m),
                        _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int32_t>(i))));
    _mm256_storeu_ps(candidate_values + m, _mm256_permutevar8x32_ps(a, lanes));
    m += static_cast<uint64_t>(__builtin_popcount(pass));
  }
  for (; i < end; ++i) {
    float a = grad[i];
    if (kHasResidual) a = grad[i] + residual[i];
    const uint32_t abs = FloatBits(a) & 0x7fffffffu;
    bad += abs >= 0x7f800000u;
    const int32_t key = static_cast<int32_t>(abs > 0x7f800000u ? 0 : abs + 1);  // MagnitudeKey
    if (kZero) {
      residual[i] = key >= static_cast<int32_t>(guess.FloorAt(i)) ? 0.0f : a;
    } else if (kHasResidual) {
      residual[i] = a;
    }
    if (key >= lo) {
      candidates[m] = static_cast<uint32_t>(i);
      candidate_values[m] = a;
      ++m;
    }
  }
  *nonfinite += bad;
  return m;
}

// ------------------------------------------------------------ the emit --
// Eight candidates at a time: ranks, the two masks, the selection rule
// (internal::TakeMask), the residual stores, bit by bit, for the
// candidates whose residual changes (internal::SettleResiduals says
// which), then the permutes into the outputs (full-width stores while
// eight outputs remain, one by one after), which may be the candidate
// lists themselves (topk.cc's EmitSelectedAs). The last group's loads are
// masked.
template <ValueFormat kFormat, bool kHasResidual, uint32_t kShift>
GRADWIRE_WIDE_INLINE void EmitAs(const internal::SelectTemp& t, uint64_t m, uint64_t k,
                                 uint32_t cut, uint64_t take_equal, bool zeroed,
                                 const internal::ZeroGuess& guess, float* residual,
                                 uint32_t* indices, uint8_t* values) {
  const float* vals = t.candidate_values;
  const uint32_t* cands = t.candidates;
  const __m256i icut = _mm256_set1_epi32(static_cast<int32_t>(cut));
  const __m256i from = _mm256_set1_epi32(static_cast<int32_t>(guess.from));
  const __m256i band = _mm256_set1_epi32(static_cast<int32_t>(guess.band));
  // idx < before, unsigned, as a signed compare with the sign bits flipped.
  const __m256i flip = _mm256_set1_epi32(INT32_MIN);
  const __m256i before =
      _mm256_xor_si256(_mm256_set1_epi32(static_cast<int32_t>(guess.before)), flip);
  const __m256i lane_ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t c = 0; c < m; c += 8) {
    const uint32_t lanes = m - c < 8 ? static_cast<uint32_t>(m - c) : 8;
    const uint32_t valid = (1u << lanes) - 1;
    __m256 v;
    __m256i idx;
    if (lanes == 8) {
      v = _mm256_loadu_ps(vals + c);
      idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cands + c));
    } else {
      const __m256i live =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(lanes)), lane_ids);
      v = _mm256_maskload_ps(vals + c, live);
      idx = _mm256_maskload_epi32(reinterpret_cast<const int*>(cands + c), live);
    }
    __m256i abs;
    const __m256i keys = Keys(v, &abs);
    const __m256i ranks = _mm256_srli_epi32(keys, static_cast<int>(kShift));
    const uint32_t above = static_cast<uint32_t>(_mm256_movemask_ps(
                               _mm256_castsi256_ps(_mm256_cmpgt_epi32(ranks, icut)))) &
                           valid;
    const uint32_t equal = static_cast<uint32_t>(_mm256_movemask_ps(
                               _mm256_castsi256_ps(_mm256_cmpeq_epi32(ranks, icut)))) &
                           valid;
    uint32_t take = internal::TakeMask(above, equal, take_equal, &taken_equal);
    // Never more than k (the threshold guarantees it; the outputs hold k).
    while (j + static_cast<uint64_t>(__builtin_popcount(take)) > k) {
      take &= ~(1u << (31 - __builtin_clz(take)));
    }
    if (kHasResidual) {
      // The pass wrote 0 where it guessed (with `zeroed`).
      uint32_t zero = 0;
      if (zeroed) {
        const __m256i early = _mm256_cmpgt_epi32(before, _mm256_xor_si256(idx, flip));
        zero = AtLeast(keys, _mm256_blendv_epi8(from, band, early)) & valid;
      }
      internal::SettleResiduals<kFormat>(take, zero, zeroed, cands + c, vals + c, residual);
    }
    const uint64_t count = static_cast<uint64_t>(__builtin_popcount(take));
    if (j + 8 <= k) {
      const __m256i perm = Lanes(take);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(indices + j),
                          _mm256_permutevar8x32_epi32(idx, perm));
      if (kFormat == ValueFormat::kFp32) {
        _mm256_storeu_ps(reinterpret_cast<float*>(values + 4 * j),
                         _mm256_permutevar8x32_ps(v, perm));
      } else {
        uint64_t o = j;
        for (uint32_t b = take; b != 0; b &= b - 1, ++o) {
          StoreValue(values, o, vals[c + __builtin_ctz(b)], kFormat);
        }
      }
    } else {
      uint64_t o = j;
      for (uint32_t b = take; b != 0; b &= b - 1, ++o) {
        const int l = __builtin_ctz(b);
        indices[o] = cands[c + l];
        StoreValue(values, o, vals[c + l], kFormat);
      }
    }
    j += count;
  }
}

}  // namespace

#include "gradwire/kernels/cpu/topk_wide_entry.inc"

#undef GRADWIRE_WIDE_INLINE
#undef GRADWIRE_WIDE_TARGET
#endif  // GRADWIRE_CPU_V3_FUNCTIONS

}  // namespace topk_v3
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
