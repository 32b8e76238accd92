// Internal to kernels/cpu: the radix selection behind exact top-k (and
// the bins of approximate top-k). Not part of the API the CUDA kernels
// mirror.
//
// The templates below are always inlined: a caller built in several
// clones (clones_x86.h) then gets a copy at each clone's level. Left to
// the compiler, one out-of-line copy built for the baseline served every
// clone (top-k 10 % at 1M: 4-5 % of the encode).
//
// Selection picks the k LARGEST 32-bit keys, ties to the lower index:
//   1. the kernel finds a lower bound T0 that about k + 5 sd + slack
//      keys reach (PaddedRank, from a sample of the keys) and, in its one
//      fused pass over n, appends every index whose key >= T0 and its
//      value to the candidate list, in index order (so that later passes
//      read candidates in order instead of gathering them from n floats,
//      a cache miss each); if fewer than k made it, every element becomes
//      a candidate;
//   2. SelectInWindow histograms the two binades of keys above T0 (the
//      pass counts each stretch of candidates it appends, while they are
//      in L1) and then the k-th key's bin: the exact k-th key T and how
//      many keys equal to T to take (lowest index first). When it cannot (the
//      fallback, or T far above T0), SelectAmongCandidates histograms the
//      top 12 key bits, then two 10-bit passes within the k-th's bin.
// Then a candidate is selected iff key > T, or key == T and fewer than
// take_equal such candidates have been taken before it. Only step 1 reads
// all n elements.
#ifndef GRADWIRE_KERNELS_CPU_RADIX_SELECT_H_
#define GRADWIRE_KERNELS_CPU_RADIX_SELECT_H_

#include <stdint.h>
#include <string.h>

namespace gradwire {
namespace kernels {
namespace cpu {
namespace internal {

inline constexpr uint32_t kTopShift = 20;
inline constexpr uint32_t kTopBins = 1u << (32 - kTopShift);  // 4096

inline constexpr uint64_t kSampleSize = 16384;

// CountTopBins's four interleaved counters per bin.
inline constexpr uint64_t kSubHistograms = 4;

// Histogram, CountTopBins's counters, key sample, then candidate lists of
// up to n indices and (top-k) up to n values. The caller's temp is never
// read before written, so the lists cost only the pages the candidates
// touch.
inline uint64_t SelectTempBytes(uint64_t n) {
  return kTopBins * sizeof(uint64_t) + kSubHistograms * kTopBins * sizeof(uint32_t) +
         kSampleSize * sizeof(uint32_t) + 8 * n;
}

struct SelectTemp {
  uint64_t* hist;
  uint32_t* sub_hist;  // kSubHistograms * kTopBins
  uint32_t* sample;
  uint32_t* candidates;
  float* candidate_values;
};

inline SelectTemp CarveSelectTemp(void* temp, uint64_t n) {
  SelectTemp t;
  t.hist = static_cast<uint64_t*>(temp);
  t.sub_hist = reinterpret_cast<uint32_t*>(t.hist + kTopBins);
  t.sample = t.sub_hist + kSubHistograms * kTopBins;
  t.candidates = t.sample + kSampleSize;
  t.candidate_values = reinterpret_cast<float*>(t.candidates + n);
  return t;
}

// How many of `population` keys to expect at or above the k-th largest of
// n, padded so that the true k-th key falls below the estimate's threshold
// with overwhelming probability: 5 standard deviations of the sample's
// count (a stratified sample's count varies less than a binomial's), plus
// 8. There was a further 25 % of k: at 10 % density and 1M elements it
// made 1.5 k candidates instead of 1.27 k, and each extra one costs the
// selection and the emit a pass and a scattered residual store.
inline uint64_t PaddedRank(uint64_t k, uint64_t n, uint64_t population) {
  const double expected =
      static_cast<double>(k) * static_cast<double>(population) / static_cast<double>(n);
  double sd = 1.0;  // sqrt(expected), by Newton steps: no <cmath> needed
  for (int i = 0; i < 40 && expected > 0; ++i) sd = 0.5 * (sd + expected / sd);
  return static_cast<uint64_t>(expected + 5.0 * sd + 8.0);
}

// How a histogram of kTopBins bins places a key >= base: in bin
// min((key - base) >> shift, kTopBins - 1). CountTopBins's rule is
// {0, kTopShift} (every key < 2^31 has its own bin); SelectInWindow's is
// WindowRule(lower).
struct BinRule {
  uint32_t base = 0;
  uint32_t shift = kTopShift;
};

// Adds key(begin..end) (each >= rule.base) to `sub`, kSubHistograms
// counters per bin (kSubHistograms * kTopBins, summed by SumBins).
// Neighbouring keys of one magnitude (a layer's gradient) crowd one or
// two bins, and a chain of increments of one counter runs at the latency
// of a store and a load: the bins of a block of keys are formed first (a
// vectorized loop), then counted round-robin into the kSubHistograms
// counters. At ResNet-50 size and 10 % (2.8M candidates, layered
// magnitudes) 1.45 -> 1.0 ms in a harness. Callable on consecutive
// ranges (the fused pass counts the candidates it has just appended).
template <typename KeyFn>
__attribute__((always_inline)) inline void CountBins(const KeyFn& key, uint64_t begin, uint64_t end,
                                                     BinRule rule, uint32_t* sub) {
  static_assert(kSubHistograms == 4, "the loop below counts four at a time");
  constexpr uint64_t kBlock = 512;
  uint16_t bins[kBlock];
  for (uint64_t start = begin; start < end; start += kBlock) {
    const uint64_t len = end - start < kBlock ? end - start : kBlock;
    for (uint64_t j = 0; j < len; ++j) {
      const uint32_t bin = (key(start + j) - rule.base) >> rule.shift;
      bins[j] = static_cast<uint16_t>(bin < kTopBins - 1 ? bin : kTopBins - 1);
    }
    uint64_t j = 0;
    for (; j + 4 <= len; j += 4) {
      ++sub[bins[j]];
      ++sub[kTopBins + bins[j + 1]];
      ++sub[2 * kTopBins + bins[j + 2]];
      ++sub[3 * kTopBins + bins[j + 3]];
    }
    for (; j < len; ++j) ++sub[bins[j]];
  }
}

// hist[b] = the sum of b's kSubHistograms counters in `sub`.
inline void SumBins(const uint32_t* sub, uint64_t* hist) {
  for (uint32_t b = 0; b < kTopBins; ++b) {
    hist[b] = uint64_t{sub[b]} + sub[kTopBins + b] + sub[2 * kTopBins + b] + sub[3 * kTopBins + b];
  }
}

// hist[b] = how many of the m keys key(0..m) have key >> kTopShift == b,
// for every b < kTopBins (m < 2^32), counted through `sub`
// (kSubHistograms * kTopBins).
template <typename KeyFn>
__attribute__((always_inline)) inline void CountTopBins(const KeyFn& key, uint64_t m,
                                                        uint64_t* hist, uint32_t* sub) {
  memset(sub, 0, kSubHistograms * kTopBins * sizeof(uint32_t));
  CountBins(key, 0, m, BinRule{}, sub);
  SumBins(sub, hist);
}

struct BinPick {
  uint32_t bin = 0;    // bin holding the k-th largest key
  uint64_t above = 0;  // keys in higher bins (all selected), < k
};

// Requires 1 <= k <= sum(hist[0..bins)).
inline BinPick PickBin(const uint64_t* hist, uint32_t bins, uint64_t k) {
  BinPick p;
  for (uint32_t b = bins; b-- > 0;) {
    if (p.above + hist[b] >= k) {
      p.bin = b;
      return p;
    }
    p.above += hist[b];
  }
  return p;  // unreachable when the precondition holds
}

// Appends each i < n, in index order, to `out`: all of them (a fallback
// when a threshold was too high).
inline uint64_t CollectAll(uint64_t n, uint32_t* out) {
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(i);
  return n;
}

// The selection rule for a group of candidates in index order: `above`
// and `equal` (bit masks, lowest bit = first) say whose keys are above or
// at the threshold; equal ones are taken, lowest first, while fewer than
// take_equal have been seen (counted in *taken_equal across groups).
// Returns the mask taken.
__attribute__((always_inline)) inline uint32_t TakeMask(uint32_t above, uint32_t equal,
                                                        uint64_t take_equal,
                                                        uint64_t* taken_equal) {
  uint32_t take = above;
  if (equal != 0) {
    uint64_t room = *taken_equal < take_equal ? take_equal - *taken_equal : 0;
    for (uint32_t e = equal; room > 0 && e != 0; --room, e &= e - 1) take |= e & (0u - e);
    *taken_equal += static_cast<uint64_t>(__builtin_popcount(equal));
  }
  return take;
}

struct Threshold {
  uint32_t key = 0;         // the k-th largest key
  uint64_t take_equal = 0;  // how many keys == `key` are selected (>= 1)
};

// `key(j)` is the key of the j-th of the m candidates. `need` (>= 1) is k
// minus the candidates above `bin`.
template <typename KeyFn>
__attribute__((always_inline)) inline Threshold RefineThreshold(const KeyFn& key, uint64_t m,
                                                                uint32_t bin, uint64_t need) {
  uint64_t hist[1024];
  // Middle 10 bits of the keys in `bin`.
  memset(hist, 0, sizeof hist);
  // Every candidate adds 0 or 1 to some bin: no branch on whether it is
  // in `bin` (a data-dependent guess, wrong for a good share of them).
  for (uint64_t j = 0; j < m; ++j) {
    const uint32_t kk = key(j);
    hist[(kk >> 10) & 1023] += (kk >> kTopShift) == bin ? 1u : 0u;
  }
  const BinPick mid = PickBin(hist, 1024, need);
  need -= mid.above;
  const uint32_t prefix = (bin << 10) | mid.bin;
  // Low 10 bits of the keys sharing the top 22.
  memset(hist, 0, sizeof hist);
  for (uint64_t j = 0; j < m; ++j) {
    const uint32_t kk = key(j);
    hist[kk & 1023] += (kk >> 10) == prefix ? 1u : 0u;
  }
  const BinPick low = PickBin(hist, 1024, need);
  Threshold t;
  t.key = (prefix << 10) | low.bin;
  t.take_equal = need - low.above;
  return t;
}

// Step 2: the exact k-th largest key among the m candidates (1 <= k <= m),
// `key(j)` being the j-th candidate's key.
template <typename KeyFn>
__attribute__((always_inline)) inline Threshold SelectAmongCandidates(const KeyFn& key, uint64_t m,
                                                                      uint64_t k, uint64_t* hist) {
  memset(hist, 0, kTopBins * sizeof(uint64_t));
  for (uint64_t j = 0; j < m; ++j) ++hist[key(j) >> kTopShift];
  const BinPick pick = PickBin(hist, kTopBins, k);
  return RefineThreshold(key, m, pick.bin, k - pick.above);
}

// SelectInWindow's bins: 4096 of 4096 keys each (2^kWindowLowBits),
// from `lower` up, the last one holding everything higher.
inline constexpr uint32_t kWindowLowBits = 12;
static_assert((1u << kWindowLowBits) <= kTopBins, "the second pass reuses hist");

inline BinRule WindowRule(uint32_t lower) { return BinRule{lower, kWindowLowBits}; }

// SelectInWindow's second step, given `hist` (kTopBins counts) of the m
// keys by WindowRule(lower), as the fused pass counts them while it
// appends the candidates: the k-th key's bin, then the exact key within
// it. Returns false when the k-th key lies in the last bin (at or above
// the window's top); `hist` is spent either way.
template <typename KeyFn>
__attribute__((always_inline)) inline bool SelectInCountedWindow(const KeyFn& key, uint64_t m,
                                                                 uint64_t k, uint32_t lower,
                                                                 uint64_t* hist, Threshold* out) {
  constexpr uint32_t kLowBits = kWindowLowBits;
  constexpr uint32_t kBins = kTopBins;
  const BinPick pick = PickBin(hist, kBins, k);
  if (pick.bin == kBins - 1) return false;
  const uint64_t need = k - pick.above;
  const uint32_t base = lower + (pick.bin << kLowBits);
  uint64_t* low = hist;  // its counts are spent
  memset(low, 0, (1u << kLowBits) * sizeof(uint64_t));
  // The bin holds few of the candidates (it spans 1/4096 of the window):
  // one vectorized loop stores a block's offsets from `base` and counts
  // those in the bin, and only a block that holds one is walked. (Groups
  // of sixteen with an OR of flags, as before, GCC 12 left scalar: top-k
  // 10 % at 25.6M, cold, encoded in 20.2 -> 17.8 ms on x86-64-v4 and 22.8
  // -> 20.9 ms on v3. Blocks of 128 rather than 512: in a profile of that
  // case the selection took 0.26 rather than 0.38 of the pass's time, the
  // walks fewer.) Keys below `base` wrap to large offsets.
  constexpr uint64_t kWalk = 128;
  uint32_t offsets[kWalk];
  for (uint64_t start = 0; start < m; start += kWalk) {
    const uint64_t len = m - start < kWalk ? m - start : kWalk;
    uint32_t in = 0;
    for (uint64_t j = 0; j < len; ++j) {
      offsets[j] = key(start + j) - base;
      in += offsets[j] < (1u << kLowBits) ? 1u : 0u;
    }
    if (in == 0) continue;
    for (uint64_t j = 0; j < len; ++j) {
      if (offsets[j] < (1u << kLowBits)) ++low[offsets[j]];
    }
  }
  const BinPick exact = PickBin(low, 1u << kLowBits, need);
  out->key = base + exact.bin;
  out->take_equal = need - exact.above;
  return true;
}

// Step 2 when every candidate key is >= `lower` (> 0, a sampled bound
// that about k + 5 sd + slack keys reach): the k-th key is then usually
// within a factor of four of `lower` in magnitude, so the first
// histogram spans the 2^24 keys (two binades) from `lower` up in 4096
// bins of 4096 keys (everything higher in the last one), and one pass
// over the 4096 keys of the k-th's bin finds it exactly: two passes over
// the candidates instead of three, and the keys near the threshold spread
// over many bins instead of crowding the two or three of the top-12-bit
// histogram (a chain of increments of one counter runs at the latency of
// a store and a load, not the throughput).
// Returns false, having found nothing, when the k-th key lies above the
// window; the caller then runs SelectAmongCandidates. Requires
// 1 <= k <= m, kTopBins (4096) uint64_t in `hist` and kSubHistograms *
// kTopBins uint32_t in `sub`. The fused pass counts its candidates as it
// appends them (CountBins on WindowRule(lower)) and runs only the second
// step, SelectInCountedWindow.
template <typename KeyFn>
__attribute__((always_inline)) inline bool SelectInWindow(const KeyFn& key, uint64_t m, uint64_t k,
                                                          uint32_t lower, uint64_t* hist,
                                                          uint32_t* sub, Threshold* out) {
  memset(sub, 0, kSubHistograms * kTopBins * sizeof(uint32_t));
  CountBins(key, 0, m, WindowRule(lower), sub);
  SumBins(sub, hist);
  return SelectInCountedWindow(key, m, k, lower, hist, out);
}

}  // namespace internal
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RADIX_SELECT_H_
