// The candidate selection behind exact top-k (kernels/cpu/radix_select.h)
// against a sort: the k-th largest key and how many keys equal to it are
// taken. The windowed selection must agree whenever it answers, and answer
// exactly when the k-th key lies inside its window.
#include "gradwire/kernels/cpu/radix_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace internal {
namespace {

// The window: 4096 bins of 4096 keys from `lower`, the last bin open.
constexpr uint32_t kWindowTop = 4095u * 4096u;

Threshold Reference(std::vector<uint32_t> keys, uint64_t k) {
  std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
  Threshold t;
  t.key = keys[k - 1];
  const uint64_t above =
      std::count_if(keys.begin(), keys.end(), [&](uint32_t x) { return x > t.key; });
  t.take_equal = k - above;
  return t;
}

// Keys >= lower: most near the bottom of the window, many exactly on a
// bin edge or one key off it (the edges of the second pass), some far
// above the window (its open bin), some equal.
std::vector<uint32_t> MakeKeys(uint32_t lower, uint64_t m, double above_window,
                               std::mt19937_64& rng) {
  std::vector<uint32_t> keys(m);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (uint32_t& key : keys) {
    const double r = u(rng);
    uint32_t offset;
    if (r < above_window) {
      offset = kWindowTop + static_cast<uint32_t>(rng() % (1u << 26));
    } else if (r < above_window + 0.3) {
      offset = static_cast<uint32_t>(rng() % 64) * 4096u + static_cast<uint32_t>(rng() % 3) - 1u;
      if (offset > kWindowTop) offset = 0;  // wrapped below 0
    } else if (r < above_window + 0.4) {
      offset = 7u * 4096u;  // many equal keys
    } else {
      offset = static_cast<uint32_t>(rng() % (1u << 18));
    }
    key = lower + offset;
  }
  return keys;
}

TEST(RadixSelectTest, WindowAnswersExactlyWhenTheKthIsInsideAndMatchesASort) {
  GRADWIRE_SEEDED_RNG(rng);
  uint64_t hist[kTopBins];
  std::vector<uint32_t> sub(kSubHistograms * kTopBins, 7);  // old contents must not count
  int answered = 0, declined = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t lower = 1 + static_cast<uint32_t>(rng() % 0x7e000000u);
    const uint64_t m = 1 + rng() % 5000;
    const double above_window = (trial % 4) * 0.1;
    const std::vector<uint32_t> keys = MakeKeys(lower, m, above_window, rng);
    const auto key = [&keys](uint64_t j) { return keys[j]; };
    for (uint64_t k : {uint64_t{1}, m, 1 + rng() % m, 1 + rng() % m}) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " m " << m << " k " << k);
      const Threshold want = Reference(keys, k);
      const Threshold generic = SelectAmongCandidates(key, m, k, hist);
      EXPECT_EQ(generic.key, want.key);
      EXPECT_EQ(generic.take_equal, want.take_equal);
      Threshold got;
      const bool ok = SelectInWindow(key, m, k, lower, hist, sub.data(), &got);
      ASSERT_EQ(ok, want.key - lower < kWindowTop) << "kth offset " << want.key - lower;
      // The fused pass's way: the window counted a piece at a time (as
      // the candidates are appended), then only the second step.
      std::fill(sub.begin(), sub.end(), 0u);
      for (uint64_t begin = 0; begin < m;) {
        const uint64_t end = std::min<uint64_t>(m, begin + rng() % 700);
        CountBins(key, begin, end, WindowRule(lower), sub.data());
        begin = end;
      }
      SumBins(sub.data(), hist);
      Threshold counted;
      ASSERT_EQ(SelectInCountedWindow(key, m, k, lower, hist, &counted), ok);
      if (!ok) {
        ++declined;
        continue;
      }
      ++answered;
      EXPECT_EQ(got.key, want.key);
      EXPECT_EQ(got.take_equal, want.take_equal);
      EXPECT_EQ(counted.key, want.key);
      EXPECT_EQ(counted.take_equal, want.take_equal);
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(answered, 100);
  EXPECT_GT(declined, 50);
}

TEST(RadixSelectTest, CountTopBinsCountsEveryKeyInItsBin) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<uint64_t> hist(kTopBins);
  std::vector<uint32_t> sub(kSubHistograms * kTopBins, 7);  // old contents must not count
  // Lengths around the four-way step and the 512-key block; runs of keys
  // in one bin (a layer's), spread keys, and the lowest and highest bins.
  for (uint64_t m : {0ull, 1ull, 3ull, 4ull, 5ull, 511ull, 512ull, 513ull, 2049ull, 100003ull}) {
    std::vector<uint32_t> keys(m);
    uint32_t run_bin = 0;
    for (uint64_t j = 0; j < m; ++j) {
      if (j % 37 == 0) run_bin = static_cast<uint32_t>(rng() % kTopBins);
      const uint64_t kind = rng() % 4;
      const uint32_t bin = kind == 0   ? static_cast<uint32_t>(rng() % kTopBins)
                           : kind == 1 ? (rng() % 2 == 0 ? 0u : kTopBins - 1)
                                       : run_bin;
      keys[j] = (bin << kTopShift) | static_cast<uint32_t>(rng() % (1u << kTopShift));
    }
    std::vector<uint64_t> want(kTopBins, 0);
    for (uint32_t key : keys) ++want[key >> kTopShift];
    std::fill(hist.begin(), hist.end(), 99);
    CountTopBins([&](uint64_t j) { return keys[j]; }, m, hist.data(), sub.data());
    EXPECT_EQ(hist, want) << "m " << m;
  }
}

}  // namespace
}  // namespace internal
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
