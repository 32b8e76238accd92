// Internal to kernels/cpu: the radix selection behind exact top-k and
// random-k. Not part of the API the CUDA kernels mirror.
//
// Selection picks the k LARGEST 32-bit keys, ties to the lower index, in
// three steps a kernel interleaves with its own fused passes:
//   1. the kernel histograms key >> kTopShift over all n (PickBin finds the
//      bin holding the k-th largest key);
//   2. CollectCandidates keeps, in index order, every index whose bin is
//      at least that bin (typically k plus a fraction of one bin);
//   3. RefineThreshold runs two 10-bit histogram passes over only the
//      candidates in that bin and returns the exact k-th key T and how many
//      keys equal to T to take (the lowest indices first).
// Then index i is selected iff key > T, or key == T and fewer than
// take_equal such indices have been taken before it.
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

// Histogram, then candidate list of up to n indices.
inline uint64_t SelectTempBytes(uint64_t n) { return kTopBins * sizeof(uint64_t) + 4 * n; }

struct SelectTemp {
  uint64_t* hist;
  uint32_t* candidates;
};

inline SelectTemp CarveSelectTemp(void* temp) {
  SelectTemp t;
  t.hist = static_cast<uint64_t*>(temp);
  t.candidates = reinterpret_cast<uint32_t*>(t.hist + kTopBins);
  return t;
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

// Appends to `out`, in index order, each i < n with key(i) >> kTopShift >=
// bin; returns how many.
template <typename KeyFn>
uint64_t CollectCandidates(const KeyFn& key, uint64_t n, uint32_t bin, uint32_t* out) {
  uint64_t m = 0;
  for (uint64_t i = 0; i < n; ++i) {
    // Branch-free append: the store is unconditional, the count is not.
    out[m] = static_cast<uint32_t>(i);
    m += (key(i) >> kTopShift) >= bin;
  }
  return m;
}

struct Threshold {
  uint32_t key = 0;         // the k-th largest key
  uint64_t take_equal = 0;  // how many keys == `key` are selected (>= 1)
};

// `need` (>= 1) is k minus the candidates above `bin`.
template <typename KeyFn>
Threshold RefineThreshold(const KeyFn& key, const uint32_t* cand, uint64_t m, uint32_t bin,
                          uint64_t need) {
  uint64_t hist[1024];
  // Middle 10 bits of the keys in `bin`.
  memset(hist, 0, sizeof hist);
  for (uint64_t j = 0; j < m; ++j) {
    const uint32_t kk = key(cand[j]);
    if ((kk >> kTopShift) == bin) ++hist[(kk >> 10) & 1023];
  }
  const BinPick mid = PickBin(hist, 1024, need);
  need -= mid.above;
  const uint32_t prefix = (bin << 10) | mid.bin;
  // Low 10 bits of the keys sharing the top 22.
  memset(hist, 0, sizeof hist);
  for (uint64_t j = 0; j < m; ++j) {
    const uint32_t kk = key(cand[j]);
    if ((kk >> 10) == prefix) ++hist[kk & 1023];
  }
  const BinPick low = PickBin(hist, 1024, need);
  Threshold t;
  t.key = (prefix << 10) | low.bin;
  t.take_equal = need - low.above;
  return t;
}

}  // namespace internal
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_RADIX_SELECT_H_
