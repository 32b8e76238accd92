// Internal to kernels/cpu/topk.cc: what exact and approximate top-k learn
// from a sample of the keys before their one pass over n elements (step 1
// in radix_select.h): the candidates' lower bound, and the guess at the
// selection by which the pass writes the residuals (ZeroGuess).
#ifndef GRADWIRE_KERNELS_CPU_TOPK_SAMPLE_H_
#define GRADWIRE_KERNELS_CPU_TOPK_SAMPLE_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/prefetch.h"
#include "gradwire/kernels/cpu/radix_select.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace internal {

// The pass's guess at the selection, for the residuals (fp32 values with a
// residual): it writes 0, a selected element's residual, for every
// element whose key is >= `from`, or >= `band` with an index below
// `before`; the emit then rewrites only the candidates that the selection
// decided otherwise, each a scattered store. Exact top-k guesses by key
// alone (band == from). Approximate top-k fills its band in index order,
// so it guesses the band and the index where the fill ends. band <= from
// are candidate keys (>= the pass's lower bound) and `before` is a
// multiple of kGuessBlock, so that it splits no block of the pass.
inline constexpr uint64_t kGuessBlock = 32;

// When the pass also counts its candidates into a histogram (CountBins),
// it counts the ones it appended every kCountSegment elements, while they
// are in L1 (about 800 at 10 % density). A multiple of kGuessBlock.
inline constexpr uint64_t kCountSegment = 8192;
static_assert(kCountSegment % kGuessBlock == 0, "segments split no block of the pass");

struct ZeroGuess {
  uint32_t from = 0;
  uint32_t band = 0;
  uint32_t before = 0;

  // The key from which the pass zeroes in the block starting at `start`
  // (a multiple of kGuessBlock, or of a divisor of it).
  uint32_t FloorAt(uint64_t start) const { return start < before ? band : from; }
};

// What the sample says before the pass (SampleLowerBound).
struct SampledBounds {
  uint32_t lower = 0;  // candidates: key >= lower (0: every element)
  ZeroGuess zero;      // its keys >= lower
};

// How many of the n elements SampleLowerBound reads, for k of them to
// select. Each sampled element is a cache miss in grad and residual (and,
// in a large bucket, a TLB miss), while a smaller sample only loosens the
// lower bound by its few standard deviations (PaddedRank), letting more
// candidates through the pass. Below 4M elements a quarter of
// kSampleSize is cheaper than the few more candidates it lets through
// (within about a fifth of k); and where k <= n / 32 a quarter of that
// again: there the extra candidates cost less than the misses saved (on
// a Zen 3 core with caches cold, 1M elements: 0.1 % and 1 % a few per
// cent faster), while at 10 % they cost more (1M: 1.48 -> 1.77 ms). Only
// speed depends on it (docs/results/2026-11-30-sample-size.md).
inline uint64_t SampleSize(uint64_t n, uint64_t k) {
  const uint64_t s = n < (uint64_t{1} << 22) ? kSampleSize / 4 : kSampleSize;
  return k <= n / 32 ? s / 4 : s;
}

// Approximate top-k takes everything above its band and fills the rest of
// k from the band in index order. Zeroing by key (from the likeliest k-th
// key up) left about a third of the band (2 f (1 - f), f the share of it
// taken) for the emit to rewrite, each a store miss (approximate top-k 10 %
// at 25.6M, cold: the emit took 0.46 of the pass's time; with this guess
// 0.29, and the encode 19.2 -> 17.0 ms). The sample (`s` keys
// in index order, sample[j] at index at(j)) shows the band (the bin of
// `likely_key`, the (likely + 1)-th largest sampled key) and where its
// fill ends: the pass zeroes the bins above it, and the band below the
// index halfway between the sampled members the fill takes last and
// leaves first.
template <typename At>
inline ZeroGuess GuessBandFill(const uint32_t* sample, uint64_t s, uint64_t likely,
                               uint32_t likely_key, uint64_t n, const At& at) {
  const uint32_t bin = likely_key >> kTopShift;  // <= kMaxMagnitudeKey >> kTopShift: no overflow
  const uint32_t lo = bin << kTopShift, hi = (bin + 1) << kTopShift;
  uint64_t above = 0;
  for (uint64_t j = 0; j < s; ++j) above += sample[j] >= hi ? 1 : 0;
  // The (likely + 1)-th largest key is in the band: take >= 1 of its
  // sampled members.
  const uint64_t take = likely + 1 - above;
  uint64_t seen = 0, last = 0, cut = n;
  for (uint64_t j = 0; j < s; ++j) {
    if (sample[j] < lo || sample[j] >= hi) continue;
    if (seen++ < take) {
      last = at(j);
    } else {
      cut = last + (at(j) - last) / 2 + 1;
      break;
    }
  }
  // A multiple of kGuessBlock that fits in 32 bits.
  constexpr uint64_t kMaxBefore = uint64_t{0xffffffff} & ~(kGuessBlock - 1);
  cut = (cut + kGuessBlock - 1) & ~(kGuessBlock - 1);
  return {hi, lo, static_cast<uint32_t>(cut < kMaxBefore ? cut : kMaxBefore)};
}

// A key that about k + 5 sd + slack (PaddedRank) of the n elements reach, estimated from
// s <= kSampleSize evenly spread elements (0, i.e. "everything", when a
// sample would not narrow things down). Only speed depends on the
// estimate: a threshold that turns out too high is caught by the caller
// (and approximate top-k widens it to whole bins, so that its band is
// always complete among the candidates).
// Also the likeliest k-th key (the sampled key at the expected rank), from
// which the pass zeroes the residual: the candidates whose residual the
// emit must then change are only those between it and the true k-th key
// (a standard deviation's worth), not every rejected candidate (over a
// quarter of k at 10 %), and each is a store miss: top-k 10 % at 1M, with
// caches cold, emitted in 77-79 us instead of 142-152 us (of about 700).
// With `band` (approximate top-k) the guess is the likeliest band (the bin
// of that key) and where in index order its fill ends (GuessBandFill).
inline SampledBounds SampleLowerBound(const float* grad, const float* residual, uint64_t n,
                                      uint64_t k, uint64_t s, bool band, uint32_t* sample,
                                      uint64_t* hist) {
  if (n < 8 * kSampleSize) return {};
  const uint64_t rank = PaddedRank(k, n, s);
  if (rank >= s / 2) return {};
  const uint64_t stride = n / s;
  // One element per stride, at a scrambled offset so that periodic
  // structure in the gradient (layer boundaries) cannot line up. The
  // offset maps a 64-bit hash into [0, stride) by multiply-high (no
  // division). Every sampled element is a cache miss, in a large bucket a
  // TLB miss too: the positions are formed first (into `sample`; they are
  // < n <= 2^32), so that the loop of loads is short and the core keeps
  // many of its misses in flight at once.
  auto at = [stride](uint64_t j) {
    return j * stride +
           static_cast<uint64_t>((static_cast<unsigned __int128>(Mix64(j)) * stride) >> 64);
  };
  // The loads ask for the lines kScatterPrefetchAhead positions on into
  // the L2 (prefetch.h), so that far more misses are in flight than the
  // L1 tracks.
  for (uint64_t j = 0; j < s; ++j) sample[j] = static_cast<uint32_t>(at(j));
  const uint64_t ahead = s > kScatterPrefetchAhead ? s - kScatterPrefetchAhead : 0;
  if (residual != nullptr) {
    for (uint64_t j = 0; j < s; ++j) {
      if (j < ahead) {
        PrefetchToL2(grad + sample[j + kScatterPrefetchAhead]);
        PrefetchToL2(residual + sample[j + kScatterPrefetchAhead]);
      }
      sample[j] = MagnitudeKey(grad[sample[j]] + residual[sample[j]]);
    }
  } else {
    for (uint64_t j = 0; j < s; ++j) {
      if (j < ahead) PrefetchToL2(grad + sample[j + kScatterPrefetchAhead]);
      sample[j] = MagnitudeKey(grad[sample[j]]);
    }
  }
  // The (rank + 1)-th largest sampled key, by the radix selection the
  // candidates get (histograms, no sort: several times faster than
  // std::nth_element on 16K keys).
  auto key = [sample](uint64_t j) { return sample[j]; };
  SampledBounds b;
  b.lower = SelectAmongCandidates(key, s, rank + 1, hist).key;
  const uint64_t likely = k * s / n;  // < rank
  const uint32_t likely_key = SelectAmongCandidates(key, s, likely + 1, hist).key;
  b.zero = {likely_key, likely_key, 0};
  if (band) b.zero = GuessBandFill(sample, s, likely, likely_key, n, at);
  return b;
}

// Settles the residuals of one group of emitted candidates (cands[l],
// vals[l] for the lanes l the masks name; EmitSelected in every build):
// with `zeroed` (the pass wrote +0 as the residual of the lanes in
// `zero`, its guess) the rejected ones among those get acc back and the
// taken ones outside it get +0; otherwise the taken ones get
// ResidualAfter(acc, decoded). `zero` names live lanes only.
template <ValueFormat kFormat>
__attribute__((always_inline)) inline void SettleResiduals(uint32_t take, uint32_t zero,
                                                           bool zeroed, const uint32_t* cands,
                                                           const float* vals, float* residual) {
  if (zeroed) {
    for (uint32_t b = ~take & zero; b != 0; b &= b - 1) {
      const int l = __builtin_ctz(b);
      residual[cands[l]] = vals[l];
    }
    for (uint32_t b = take & ~zero; b != 0; b &= b - 1) residual[cands[__builtin_ctz(b)]] = 0.0f;
    return;
  }
  for (uint32_t b = take; b != 0; b &= b - 1) {
    const int l = __builtin_ctz(b);
    residual[cands[l]] = ResidualAfter(vals[l], RoundToFormat(vals[l], kFormat));
  }
}

}  // namespace internal
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_TOPK_SAMPLE_H_
