#include "gradwire/kernels/cpu/topk.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/compress_store.h"
#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/radix_select.h"
#include "gradwire/kernels/cpu/topk_sample.h"
#include "gradwire/kernels/cpu/topk_wide.h"

// The fused pass and the emit stream many elements, so on x86-64 they run
// in the widest loops the CPU has: topk_v4 (AVX-512) or topk_v3 (AVX2),
// topk_wide.h. The portable loops below serve every other CPU (and the
// baseline test build); the selection's histogram passes are built for
// several x86-64 levels (clones_x86.h). They only add and compare, so
// every build produces the same bits.

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

using internal::kTopBins;
using internal::kTopShift;
using internal::SampledBounds;
using internal::SampleLowerBound;
using internal::SampleSize;

// Tests one block of acc for candidates: writes the magnitude keys to
// `keys` and returns whether any key is >= lower; adds non-finite acc to
// *nonfinite. Keys are < 2^31, so signed 32-bit arithmetic (which SSE2
// compares natively) lets the compiler vectorize this. With kZero (fp32
// values and a residual) the residual of an element whose key is >=
// zero_from (>= lower: the block's guess, internal::ZeroGuess) is written as 0,
// which is ResidualAfter(acc, acc) for every acc, i.e. its residual if it
// is selected; EmitSelected settles the candidates that the selection
// decides otherwise. Then acc is also kept in `accs` (the residual no
// longer holds it).
template <bool kHasResidual, uint64_t kLen, bool kZero>
inline bool ScanBlock(const float* g, float* r, uint64_t len, int32_t lower, int32_t zero_from,
                      int32_t* keys, float* accs, uint64_t* nonfinite) {
  const uint64_t count = kLen > 0 ? kLen : len;
  int32_t any = 0, nf = 0;
  for (uint64_t i = 0; i < count; ++i) {
    float a = g[i];
    if (kHasResidual) a = g[i] + r[i];
    const int32_t abs = static_cast<int32_t>(FloatBits(a) & 0x7fffffffu);
    nf += abs >= 0x7f800000;
    const int32_t key = abs > 0x7f800000 ? 0 : abs + 1;  // MagnitudeKey
    keys[i] = key;
    any |= key >= lower;
    if (kZero) {
      accs[i] = a;
      r[i] = key >= zero_from ? 0.0f : a;
    } else if (kHasResidual) {
      r[i] = a;
    }
  }
  *nonfinite += static_cast<uint64_t>(nf);
  return any != 0;
}

// Bit i set iff keys[i] >= lower, for a block of len <= 32 keys.
inline uint64_t PassMask(const int32_t* keys, uint64_t len, int32_t lower) {
  uint64_t mask = 0;
#if defined(__SSE2__)
  if (len == 32) {
    const __m128i below = _mm_set1_epi32(lower - 1);  // 0 <= lower < 2^31: no wrap
    for (int v = 0; v < 8; ++v) {
      const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys + 4 * v));
      const int bits = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(k, below)));
      mask |= static_cast<uint64_t>(bits) << (4 * v);
    }
    return mask;
  }
#endif
  for (uint64_t i = 0; i < len; ++i) mask |= static_cast<uint64_t>(keys[i] >= lower) << i;
  return mask;
}

// Pass 1 of exact top-k over elements [begin, end) (begin a multiple of
// internal::kGuessBlock): acc = grad + residual (stored into the residual,
// which thereby already holds e_new = acc for every element that will not
// be selected; with kZero, 0 where `guess` says, see ScanBlock), adding
// non-finite acc to *nonfinite, and appending (in index order) every
// index whose key is >= `lower` (<= kMaxMagnitudeKey + 1) to the m
// `candidates` and its acc to `candidate_values`. Returns the new count.
// Candidates are rare (k plus a margin, of n), so blocks are tested with
// vectorized loops, and in a block where something passes only the
// passing elements are visited (a bit mask, lowest bit first).
template <bool kHasResidual, bool kZero>
__attribute__((always_inline)) inline uint64_t AccumulateAndCollect(
    const float* grad, float* residual, uint64_t begin, uint64_t end, uint32_t lower,
    const internal::ZeroGuess& guess, uint32_t* candidates, float* candidate_values, uint64_t m,
    uint64_t* nonfinite) {
  constexpr uint64_t kBlock = internal::kGuessBlock;
  const int32_t lo = static_cast<int32_t>(lower);
  uint64_t bad = 0;
  int32_t keys[kBlock];
  float accs[kBlock];
  for (uint64_t start = begin; start < end; start += kBlock) {
    const uint64_t len = end - start < kBlock ? end - start : kBlock;
    static_assert(kBlock * sizeof(float) == 128, "two lines of each stream a block");
    PrefetchAccStreams<kHasResidual>(grad, residual, start);  // prefetch.h
    PrefetchAccStreams<kHasResidual>(grad, residual, start + 16);
    // `before` splits no block.
    const int32_t zf = static_cast<int32_t>(guess.FloorAt(start));
    float* r = kHasResidual ? residual + start : nullptr;
    const bool any =
        len == kBlock
            ? ScanBlock<kHasResidual, kBlock, kZero>(grad + start, r, len, lo, zf, keys, accs, &bad)
            : ScanBlock<kHasResidual, 0, kZero>(grad + start, r, len, lo, zf, keys, accs, &bad);
    if (any) {
      // Just written: in L1.
      const float* acc = kZero ? accs : kHasResidual ? r : grad + start;
      const uint64_t mask = PassMask(keys, len, lo);
      if (len == kBlock) {
        // Eight lanes at a time, branch-free: the lists hold n entries and
        // m <= start, so each store's eight lanes stay inside them.
        for (uint32_t b = 0; b < kBlock / 8; ++b) {
          m += StoreSelected8((mask >> (8 * b)) & 0xff, static_cast<uint32_t>(start + 8 * b),
                              acc + 8 * b, candidates + m, candidate_values + m);
        }
        continue;
      }
      // The tail: walk the passing elements, lowest first.
      for (uint64_t bits = mask; bits != 0; bits &= bits - 1) {
        const int i = __builtin_ctzll(bits);
        candidates[m] = static_cast<uint32_t>(start + i);
        candidate_values[m] = acc[i];
        ++m;
      }
    }
  }
  *nonfinite += bad;
  return m;
}

// [0, n), and with `count` the candidates counted into t.sub_hist by that
// rule every internal::kCountSegment elements, while they are in L1, then
// summed into t.hist. The portable pass: an x86-64 CPU with AVX2 takes
// topk_v3's or topk_v4's (topk_wide_entry.inc, the same loop).
template <bool kHasResidual, bool kZero>
uint64_t CollectAllPortable(const float* grad, float* residual, uint64_t n, uint32_t lower,
                            const internal::ZeroGuess& guess, const internal::SelectTemp& t,
                            const internal::BinRule* count, uint64_t* nonfinite) {
  *nonfinite = 0;
  if (count == nullptr) {
    return AccumulateAndCollect<kHasResidual, kZero>(
        grad, residual, 0, n, lower, guess, t.candidates, t.candidate_values, 0, nonfinite);
  }
  memset(t.sub_hist, 0, internal::kSubHistograms * internal::kTopBins * sizeof(uint32_t));
  const float* vals = t.candidate_values;
  const auto key = [vals](uint64_t c) { return MagnitudeKey(vals[c]); };
  uint64_t m = 0;
  for (uint64_t begin = 0; begin < n; begin += internal::kCountSegment) {
    const uint64_t end = n - begin < internal::kCountSegment ? n : begin + internal::kCountSegment;
    const uint64_t before = m;
    m = AccumulateAndCollect<kHasResidual, kZero>(grad, residual, begin, end, lower, guess,
                                                  t.candidates, t.candidate_values, m, nonfinite);
    internal::CountBins(key, before, m, *count, t.sub_hist);
  }
  internal::SumBins(t.sub_hist, t.hist);
  return m;
}

// `zero`: write 0 as the residual of every element `guess` names
// (ScanBlock's kZero; requires a residual).
uint64_t AccumulateAndCollectPortable(const float* grad, float* residual, uint64_t n,
                                      uint32_t lower, bool zero, const internal::ZeroGuess& guess,
                                      const internal::SelectTemp& t, const internal::BinRule* count,
                                      uint64_t* nonfinite) {
  if (residual == nullptr) {
    return CollectAllPortable<false, false>(grad, residual, n, lower, guess, t, count, nonfinite);
  }
  return zero ? CollectAllPortable<true, true>(grad, residual, n, lower, guess, t, count, nonfinite)
              : CollectAllPortable<true, false>(grad, residual, n, lower, guess, t, count,
                                                nonfinite);
}

// With `count` (or nullptr), also counts the candidates' keys by that
// rule into t.hist.
uint64_t AccumulateAndCollect(const float* grad, float* residual, uint64_t n, uint32_t lower,
                              bool zero, const internal::ZeroGuess& guess,
                              const internal::SelectTemp& t, const internal::BinRule* count,
                              uint64_t* nonfinite) {
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (CpuIsX86V4()) {
    return topk_v4::AccumulateAndCollect(grad, residual, n, lower, zero, guess, t, count,
                                         nonfinite);
  }
#endif
#if GRADWIRE_CPU_V3_FUNCTIONS
  if (CpuIsX86V3()) {
    return topk_v3::AccumulateAndCollect(grad, residual, n, lower, zero, guess, t, count,
                                         nonfinite);
  }
#endif
  return AccumulateAndCollectPortable(grad, residual, n, lower, zero, guess, t, count, nonfinite);
}

// The fallback when the sampled bound was too high: every element is a
// candidate (acc is already complete, pass 1 having run).
uint64_t CollectAllWithValues(const float* acc, uint64_t n, const internal::SelectTemp& t) {
  for (uint64_t i = 0; i < n; ++i) {
    t.candidates[i] = static_cast<uint32_t>(i);
    t.candidate_values[i] = acc[i];
  }
  return n;
}

// Pass 1 and its fallback. Returns the number of candidates (>= k), their
// indices and acc in t, and whether the residuals of the elements b.zero
// names were written as 0 (fp32 values with a residual; otherwise the
// residual holds acc). With `count`, t.hist counts the candidates' keys by
// that rule, and *counted says so (false after the fallback, which makes
// every element a candidate).
uint64_t CollectCandidates(const float* grad, float* residual, uint64_t n, uint64_t k,
                           const SampledBounds& b, ValueFormat format,
                           const internal::SelectTemp& t, const internal::BinRule* count,
                           uint64_t* nonfinite, bool* zeroed, bool* counted) {
  *zeroed = residual != nullptr && format == ValueFormat::kFp32;
  uint64_t m =
      AccumulateAndCollect(grad, residual, n, b.lower, *zeroed, b.zero, t, count, nonfinite);
  *counted = count != nullptr;
  if (m >= k) return m;
  // The sample misjudged: every element becomes a candidate. The
  // residual first gets back the acc of those that were zeroed (restoring
  // the others too is harmless: they hold acc).
  if (*zeroed) {
    for (uint64_t c = 0; c < m; ++c) residual[t.candidates[c]] = t.candidate_values[c];
    *zeroed = false;
  }
  *counted = false;
  return CollectAllWithValues(residual != nullptr ? residual : grad, n, t);
}

// Bit l set iff lane l of a compare's result (0 or -1) is set, for lanes
// < `lanes` (<= 8). SSE2's movemask serves every clone.
GRADWIRE_CPU_INLINE uint32_t Mask8(const I32x8& v, uint32_t lanes) {
  const uint32_t valid = (1u << lanes) - 1;
#if defined(__SSE2__)
  typedef int32_t I32x4 __attribute__((vector_size(16)));
  const I32x4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3);
  const I32x4 hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return (static_cast<uint32_t>(_mm_movemask_ps(reinterpret_cast<__m128>(lo))) |
          static_cast<uint32_t>(_mm_movemask_ps(reinterpret_cast<__m128>(hi))) << 4) &
         valid;
#else
  uint32_t bits = 0;
  for (int l = 0; l < 8; ++l) bits |= static_cast<uint32_t>(v[l] != 0) << l;
  return bits & valid;
#endif
}

// Bit l of *above (*equal) is set iff lane l of the ranks is > cut
// (== cut), for lanes < `lanes` (<= 8). Ranks and cut are < 2^31: signed
// compares serve.
GRADWIRE_CPU_INLINE void CompareMasks8(const I32x8& ranks, int32_t cut, uint32_t lanes,
                                       uint32_t* above, uint32_t* equal) {
  *above = Mask8(ranks > cut, lanes);
  *equal = Mask8(ranks == cut, lanes);
}

// The lanes (< `lanes`) whose residual the pass wrote as 0: key >=
// guess.from, or >= guess.band with an index below guess.before.
GRADWIRE_CPU_INLINE uint32_t GuessMask8(const I32x8& keys, const uint32_t* cands, uint32_t lanes,
                                        const internal::ZeroGuess& guess) {
  U32x8 idx = {};
  memcpy(&idx, cands, lanes * sizeof(uint32_t));
  const I32x8 early = GRADWIRE_BITCAST(I32x8, idx < guess.before);
  const int32_t from = static_cast<int32_t>(guess.from);
  const int32_t band = static_cast<int32_t>(guess.band);  // <= from
  const I32x8 floor = from + (early & (band - from));
  return Mask8(keys >= floor, lanes);
}

// *ranks = MagnitudeKey(v) >> kShift for eight values at once.
template <uint32_t kShift>
GRADWIRE_CPU_INLINE void Ranks8(const float* v, I32x8* ranks) {
  U32x8 bits;
  memcpy(&bits, v, sizeof bits);
  const U32x8 abs = bits & 0x7fffffffu;
  const U32x8 key = abs > 0x7f800000u ? U32x8{} : abs + 1u;  // MagnitudeKey
  *ranks = GRADWIRE_BITCAST(I32x8, key >> kShift);
}

// Emits the candidates of one group (`cands`, `vals`, lanes < 8) that
// `take` names as outputs j, j + 1, ..., and settles the residuals of the
// whole group: with `zeroed` (fp32; pass 1 wrote 0 as the residual of the
// candidates in the mask `zero`, those the pass's guess named) the
// rejected ones among those get acc back and the taken ones outside it
// get 0; otherwise the taken ones get ResidualAfter(acc, decoded).
// Returns how many were taken. The outputs may be the candidate lists
// themselves (TopKOutputsInTemp; j <= the group's first candidate): the
// residuals are settled, and the group read, before its outputs are
// stored.
template <ValueFormat kFormat, bool kHasResidual>
GRADWIRE_CPU_INLINE uint32_t EmitGroup(uint32_t take, uint32_t zero, uint32_t lanes,
                                       const uint32_t* cands, const float* vals, uint64_t j,
                                       uint64_t k, bool zeroed, float* residual, uint32_t* indices,
                                       uint8_t* values) {
  const uint32_t count = kCompressTable.count[take];
  if (kHasResidual) {
    internal::SettleResiduals<kFormat>(take, zero & ((1u << lanes) - 1), zeroed, cands, vals,
                                       residual);
  }
  if (kFormat == ValueFormat::kFp32 && lanes == 8 && j + 8 <= k &&
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
    // All eight lanes are stored; those past `count` are overwritten by
    // the next group (or lie within the k outputs, unread).
    StoreSelectedPairs8(take, cands, vals, indices + j, values + 4 * j);
  } else {
    uint64_t o = j;
    for (uint32_t b = take; b != 0; b &= b - 1, ++o) {
      const int l = __builtin_ctz(b);
      indices[o] = cands[l];
      StoreValue(values, o, vals[l], kFormat);
    }
  }
  return count;
}

constexpr uint64_t kEmitAhead = 32;

// The last pass over the m candidates: emits, in index order, the k whose
// `Rank` (MagnitudeKey, or its top bin for approximate top-k) is above
// `cut`, or equal to it while fewer than `take_equal` equal ones have been
// taken, eight candidates at a time (a compare, a mask and a
// compress-store; only the residual stores walk the mask bit by bit).
// Every emit (here, topk_v3's and topk_v4's) stores a group's outputs
// only after it has read the group, so that the outputs may overwrite
// the candidates it has passed (TopKOutputsInTemp).
template <ValueFormat kFormat, bool kHasResidual, uint32_t kShift>
GRADWIRE_CPU_INLINE void EmitSelectedAs(const internal::SelectTemp& t, uint64_t m, uint64_t k,
                                        uint32_t cut, uint64_t take_equal, bool zeroed,
                                        const internal::ZeroGuess& guess, float* residual,
                                        uint32_t* indices, uint8_t* values) {
  const float* vals = t.candidate_values;
  const uint32_t* cands = t.candidates;
  const int32_t icut = static_cast<int32_t>(cut);
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t c = 0; c < m; c += 8) {
    const uint32_t lanes = m - c < 8 ? static_cast<uint32_t>(m - c) : 8;
    // Each residual the group may store is a store miss (candidates are
    // a few % of the elements, long evicted by the pass that found them):
    // fetched for writing kEmitAhead candidates early, many in flight.
    if (kHasResidual && c + kEmitAhead + 8 <= m) {
      for (int l = 0; l < 8; ++l) __builtin_prefetch(residual + cands[c + kEmitAhead + l], 1, 3);
    }
    float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float* v8 = vals + c;
    if (lanes < 8) {
      memcpy(tail, vals + c, lanes * sizeof(float));
      v8 = tail;
    }
    I32x8 ranks;
    Ranks8<kShift>(v8, &ranks);
    uint32_t above = 0, equal = 0;
    CompareMasks8(ranks, icut, lanes, &above, &equal);
    uint32_t zero = 0;
    if (kHasResidual && zeroed) {
      I32x8 keys = ranks;  // exact top-k: the ranks are the keys
      if (kShift != 0) Ranks8<0>(v8, &keys);
      zero = GuessMask8(keys, cands + c, lanes, guess);
    }
    uint32_t take = internal::TakeMask(above, equal, take_equal, &taken_equal);
    // Never more than k (the threshold guarantees it; the outputs hold k).
    while (j + kCompressTable.count[take] > k) take &= ~(1u << (31 - __builtin_clz(take)));
    j += EmitGroup<kFormat, kHasResidual>(take, zero, lanes, cands + c, vals + c, j, k, zeroed,
                                          residual, indices, values);
  }
}

template <uint32_t kShift>
GRADWIRE_CPU_INLINE void EmitSelectedShift(const internal::SelectTemp& t, uint64_t m, uint64_t k,
                                           uint32_t cut, uint64_t take_equal, bool zeroed,
                                           const internal::ZeroGuess& guess, float* residual,
                                           ValueFormat format, uint32_t* indices, uint8_t* values) {
#define GRADWIRE_EMIT(F)                                                                          \
  return residual != nullptr ? EmitSelectedAs<F, true, kShift>(t, m, k, cut, take_equal, zeroed,  \
                                                               guess, residual, indices, values)  \
                             : EmitSelectedAs<F, false, kShift>(t, m, k, cut, take_equal, zeroed, \
                                                                guess, residual, indices, values)
  switch (format) {
    case ValueFormat::kFp16:
      GRADWIRE_EMIT(ValueFormat::kFp16);
    case ValueFormat::kBf16:
      GRADWIRE_EMIT(ValueFormat::kBf16);
    default:
      GRADWIRE_EMIT(ValueFormat::kFp32);
  }
#undef GRADWIRE_EMIT
}

// kShift 0: exact top-k (cut = the k-th key); kTopShift: approximate
// top-k (cut = the band's bin). `zeroed` as CollectCandidates reports it,
// for the candidates that `guess` names. The portable emit: an x86-64 CPU
// with AVX2 takes topk_v3's or topk_v4's.
void EmitSelectedPortable(const internal::SelectTemp& t, uint64_t m, uint64_t k, uint32_t cut,
                          uint64_t take_equal, bool band, bool zeroed,
                          const internal::ZeroGuess& guess, float* residual, ValueFormat format,
                          uint32_t* indices, uint8_t* values) {
  if (band) {
    EmitSelectedShift<kTopShift>(t, m, k, cut, take_equal, zeroed, guess, residual, format, indices,
                                 values);
  } else {
    EmitSelectedShift<0>(t, m, k, cut, take_equal, zeroed, guess, residual, format, indices,
                         values);
  }
}

void EmitSelected(const internal::SelectTemp& t, uint64_t m, uint64_t k, uint32_t cut,
                  uint64_t take_equal, bool band, bool zeroed, const internal::ZeroGuess& guess,
                  float* residual, ValueFormat format, uint32_t* indices, uint8_t* values) {
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (CpuIsX86V4()) {
    return topk_v4::EmitSelected(t, m, k, cut, take_equal, band, zeroed, guess, residual, format,
                                 indices, values);
  }
#endif
#if GRADWIRE_CPU_V3_FUNCTIONS
  if (CpuIsX86V3()) {
    return topk_v3::EmitSelected(t, m, k, cut, take_equal, band, zeroed, guess, residual, format,
                                 indices, values);
  }
#endif
  EmitSelectedPortable(t, m, k, cut, take_equal, band, zeroed, guess, residual, format, indices,
                       values);
}

// internal::SelectInCountedWindow over the candidates' magnitude keys
// (t.hist counted by the pass), in each clone (the key arithmetic
// vectorizes).
GRADWIRE_CPU_CLONES bool SelectInCountedWindow(const internal::SelectTemp& t, uint64_t m,
                                               uint64_t k, uint32_t lower,
                                               internal::Threshold* th) {
  const float* vals = t.candidate_values;
  return internal::SelectInCountedWindow([vals](uint64_t c) { return MagnitudeKey(vals[c]); }, m, k,
                                         lower, t.hist, th);
}

// internal::CountTopBins over the candidates' magnitude keys, in each
// clone (the bins' arithmetic vectorizes).
GRADWIRE_CPU_CLONES void CountTopBins(const internal::SelectTemp& t, uint64_t m) {
  const float* vals = t.candidate_values;
  internal::CountTopBins([vals](uint64_t c) { return MagnitudeKey(vals[c]); }, m, t.hist,
                         t.sub_hist);
}

// The residual holds raw acc for unselected elements; make the non-finite
// ones 0 (ResidualAfter(acc, 0)). Selected ones are already finite.
void ClearNonFiniteResidual(float* residual, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (!IsFinite(residual[i])) residual[i] = 0.0f;
  }
}

void Finish(float* residual, uint64_t n, uint64_t k, uint64_t nonfinite, FusedStats* stats) {
  if (residual != nullptr && nonfinite > 0) ClearNonFiniteResidual(residual, n);
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace

OutputsInTemp TopKOutputsInTemp(void* temp, uint64_t n) {
  const internal::SelectTemp t = internal::CarveSelectTemp(temp, n);
  return {t.candidates, reinterpret_cast<uint8_t*>(t.candidate_values)};
}

void TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual, uint64_t n,
                  uint64_t k, ValueFormat format, uint32_t* indices, uint8_t* values,
                  FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  const internal::SelectTemp t = internal::CarveSelectTemp(temp, n);
  uint64_t nonfinite = 0;
  if (k == 0) {
    // Nothing to select: the fused pass only moves acc into the residual.
    AccumulateAndCollect(grad, residual, n, kMaxMagnitudeKey + 1, false, {}, t, nullptr,
                         &nonfinite);
  } else {
    const SampledBounds bounds =
        SampleLowerBound(grad, residual, n, k, SampleSize(n, k), /*band=*/false, t.sample, t.hist);
    const uint32_t lower = bounds.lower;
    // The window needs every candidate >= lower > 0; after the fallback
    // they need not be (counted false).
    const internal::BinRule window = internal::WindowRule(lower);
    bool zeroed = false, counted = false;
    const uint64_t m =
        CollectCandidates(grad, residual, n, k, bounds, format, t, lower > 0 ? &window : nullptr,
                          &nonfinite, &zeroed, &counted);
    const float* vals = t.candidate_values;
    internal::Threshold th;
    if (!counted || !SelectInCountedWindow(t, m, k, lower, &th)) {
      th = internal::SelectAmongCandidates([vals](uint64_t c) { return MagnitudeKey(vals[c]); }, m,
                                           k, t.hist);
    }
    EmitSelected(t, m, k, th.key, th.take_equal, /*band=*/false, zeroed, bounds.zero, residual,
                 format, indices, values);
  }
  Finish(residual, n, k, nonfinite, stats);
}

void ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                        uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                        uint8_t* values, FusedStats* stats, ApproxTopKBand* band) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  const internal::SelectTemp t = internal::CarveSelectTemp(temp, n);
  uint64_t nonfinite = 0;
  ApproxTopKBand b;
  if (k == 0) {
    AccumulateAndCollect(grad, residual, n, kMaxMagnitudeKey + 1, false, {}, t, nullptr,
                         &nonfinite);
  } else {
    // The same single fused pass as exact top-k, then one histogram over
    // the candidates in place of the exact refinement.
    // The bound rounded down to a whole bin: the band (the k-th key's
    // bin) is then either entirely among the candidates or, if the sample
    // put the bound above it, the fallback takes every element. Either
    // way the band is filled from all its members in index order, so the
    // result does not depend on the sample, and it is the GPU kernel's.
    SampledBounds bounds =
        SampleLowerBound(grad, residual, n, k, SampleSize(n, k), /*band=*/true, t.sample, t.hist);
    bounds.lower &= ~((uint32_t{1} << kTopShift) - 1);
    // The pass counts the candidates' top bins (after the fallback they
    // are counted again, all n).
    const internal::BinRule top_bins;
    bool zeroed = false, counted = false;
    const uint64_t m = CollectCandidates(grad, residual, n, k, bounds, format, t, &top_bins,
                                         &nonfinite, &zeroed, &counted);
    if (!counted) CountTopBins(t, m);
    const internal::BinPick pick = internal::PickBin(t.hist, kTopBins, k);
    const uint64_t fill = k - pick.above;
    b.lower_key = pick.bin << kTopShift;
    b.upper_key = (pick.bin + 1) << kTopShift;
    b.above = pick.above;
    b.in_band = t.hist[pick.bin];
    EmitSelected(t, m, k, pick.bin, fill, /*band=*/true, zeroed, bounds.zero, residual, format,
                 indices, values);
  }
  if (band != nullptr) *band = b;
  Finish(residual, n, k, nonfinite, stats);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
