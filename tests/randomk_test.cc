// Random-k: every rank derives the same indices from (seed, step).
#include "gradwire/kernels/cpu/randomk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "tests/clone_test_inputs.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

std::vector<uint32_t> Indices(uint64_t seed, uint64_t step, uint64_t n, uint64_t k) {
  uint64_t temp_bytes = 0;
  RandomKIndices(nullptr, &temp_bytes, seed, step, n, k, nullptr);
  std::vector<uint64_t> temp(temp_bytes / 8 + 1);
  std::vector<uint32_t> out(k);
  RandomKIndices(temp.data(), &temp_bytes, seed, step, n, k, out.data());
  return out;
}

// Reference: the k smallest RandomKKey, ascending (the keys are distinct).
std::vector<uint32_t> Reference(uint64_t seed, uint64_t step, uint64_t n, uint64_t k) {
  const ElementKey key = RandomKElementKey(seed, step, n);
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(),
            [&](uint32_t a, uint32_t b) { return RandomKKey(key, a) < RandomKKey(key, b); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(RandomKTest, MatchesReferenceAndIsTheSameOnEveryRank) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 10ull, 4097ull, 65536ull, 65537ull, 100000ull}) {
    std::vector<uint64_t> ks = {0, n};
    if (n) ks.insert(ks.end(), {1, n / 100 + 1, n / 2, rng() % n});
    for (uint64_t k : ks) {
      const uint64_t seed = rng(), step = rng() % 100000;
      SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k);
      const std::vector<uint32_t> rank0 = Indices(seed, step, n, k);
      ASSERT_EQ(rank0, Reference(seed, step, n, k));
      ASSERT_EQ(rank0, Indices(seed, step, n, k));  // "another rank"
      if (k > 10 && k < n) {
        EXPECT_NE(rank0, Indices(seed, step + 1, n, k));
      }
    }
  }
}

TEST(RandomKTest, UniformOverManySteps) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 1000, k = 10, steps = 20000, seed = rng();
  std::vector<int> hits(n, 0);
  for (uint64_t s = 0; s < steps; ++s) {
    for (uint32_t i : Indices(seed, s, n, k)) ++hits[i];
  }
  // Each index is chosen k/n of the time: 200 expected, sd ~14.
  const double expected = static_cast<double>(steps * k) / n;
  double chi2 = 0;
  for (int h : hits) {
    EXPECT_GT(h, expected - 80);
    EXPECT_LT(h, expected + 80);
    chi2 += (h - expected) * (h - expected) / expected;
  }
  EXPECT_LT(chi2, 1200.0);  // 999 dof: mean 999, sd ~45
}

// Pairs of indices are chosen together as often as in a uniform draw of
// k of n: k(k-1) / (n(n-1)) of the steps, for every pair (chi-square over
// all pairs) and summed over neighbours at each distance (a hash with
// structure in the index, e.g. one that keeps runs together, fails here
// even when each index alone is chosen k/n of the time).
TEST(RandomKTest, PairsAreChosenTogetherAsInAUniformDraw) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 120, k = 12, steps = 40000, seed = rng();
  std::vector<int> pair(n * n, 0);
  for (uint64_t s = 0; s < steps; ++s) {
    const std::vector<uint32_t> idx = Indices(seed, s, n, k);
    for (uint64_t a = 0; a < k; ++a) {
      for (uint64_t b = a + 1; b < k; ++b) ++pair[idx[a] * n + idx[b]];
    }
  }
  const double p = static_cast<double>(k * (k - 1)) / static_cast<double>(n * (n - 1));
  const double expected = steps * p;  // ~367 per pair
  double chi2 = 0;
  for (uint64_t a = 0; a < n; ++a) {
    for (uint64_t b = a + 1; b < n; ++b) {
      chi2 += (pair[a * n + b] - expected) * (pair[a * n + b] - expected) / expected;
    }
  }
  const double dof = n * (n - 1) / 2 - 1.0;  // 7139: sd ~120
  EXPECT_LT(chi2, dof + 8 * std::sqrt(2 * dof)) << "pairs";
  for (uint64_t d : {1ull, 2ull, 3ull, 8ull, 16ull, 60ull}) {
    double sum = 0;
    for (uint64_t a = 0; a + d < n; ++a) sum += pair[a * n + a + d];
    const double want = expected * static_cast<double>(n - d);
    EXPECT_NEAR(sum, want, 6 * std::sqrt(want)) << "distance " << d;
  }
}

// Consecutive steps, and two seeds at one step, overlap like independent
// uniform draws: hypergeometric, mean k^2/n, variance as computed below.
TEST(RandomKTest, StepsAndSeedsAreIndependent) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 5000, k = 250, trials = 4000;
  const double mean = static_cast<double>(k * k) / n;  // 12.5
  const double var = mean * (1.0 - static_cast<double>(k) / n) * (n - k) / (n - 1.0);
  for (bool across_seeds : {false, true}) {
    const uint64_t seed = rng();
    double sum = 0, sum2 = 0;
    std::vector<uint32_t> prev = Indices(seed, 0, n, k);
    for (uint64_t t = 1; t <= trials; ++t) {
      const std::vector<uint32_t> next =
          across_seeds ? Indices(seed + t, 7, n, k) : Indices(seed, t, n, k);
      const std::vector<uint32_t>& other =
          across_seeds ? Indices(seed + t + trials, 7, n, k) : prev;
      std::vector<uint32_t> common;
      std::set_intersection(next.begin(), next.end(), other.begin(), other.end(),
                            std::back_inserter(common));
      sum += common.size();
      sum2 += static_cast<double>(common.size()) * common.size();
      prev = next;
    }
    const double m = sum / trials, v = sum2 / trials - m * m;
    SCOPED_TRACE(across_seeds ? "seeds" : "steps");
    EXPECT_NEAR(m, mean, 6 * std::sqrt(var / trials));
    // The sample variance of 4000 draws is within ~7 % of the true one.
    EXPECT_NEAR(v, var, 0.25 * var);
  }
}

TEST(RandomKTest, CompressFusesErrorFeedback) {
  GRADWIRE_SEEDED_RNG(rng);
  std::normal_distribution<float> normal;
  const uint64_t n = 50001, seed = rng(), step = 3;
  std::vector<float> grad(n), residual(n), acc(n);
  for (uint64_t i = 0; i < n; ++i) {
    grad[i] = normal(rng);
    residual[i] = normal(rng);
    acc[i] = grad[i] + residual[i];
  }
  grad[5] = std::nanf("");
  acc[5] = grad[5] + residual[5];
  // k = 777 and 5000: the bitmap path (denser than 1/32 and past 2M
  // elements, hashed forward: cpu_clones_test).
  for (uint64_t k : {777ull, 5000ull})
    for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
      SCOPED_TRACE(::testing::Message() << "k " << k);
      std::vector<float> res = residual;
      uint64_t temp_bytes = 0;
      RandomKCompress(nullptr, &temp_bytes, nullptr, nullptr, n, k, seed, step, f, nullptr, nullptr,
                      nullptr);
      std::vector<uint64_t> temp(temp_bytes / 8 + 1);
      std::vector<uint32_t> idx(k);
      std::vector<uint8_t> values(k * ValueWidth(f));
      FusedStats stats;
      RandomKCompress(temp.data(), &temp_bytes, grad.data(), res.data(), n, k, seed, step, f,
                      idx.data(), values.data(), &stats);
      ASSERT_EQ(idx, Indices(seed, step, n, k));
      EXPECT_EQ(stats.nonfinite, 1u);
      std::vector<float> decoded(n, 0.0f);
      for (uint64_t j = 0; j < k; ++j) {
        decoded[idx[j]] = LoadValue(values.data(), j, f);
        ASSERT_EQ(FloatBits(decoded[idx[j]]), FloatBits(RoundToFormat(acc[idx[j]], f)));
      }
      for (uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(FloatBits(res[i]), FloatBits(ResidualAfter(acc[i], decoded[i]))) << i;
      }
    }
}

// RandomKDecodeAverage against the reference's indices: each entry's sum
// from +0 in payload order, divided; +0 everywhere else; nothing past n.
void CheckAverage(uint64_t n, uint64_t k, size_t p, ValueFormat f, float divisor,
                  std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k << " p " << p << " format "
                                    << static_cast<int>(f) << " divisor " << divisor);
  const uint64_t seed = rng(), step = rng() % 1000;
  std::vector<std::vector<uint8_t>> payloads(p);
  std::vector<const uint8_t*> values;
  for (auto& v : payloads) {
    const std::vector<float> x = Mixed(k, rng);
    v.assign(k * ValueWidth(f) + 1, 0);
    for (uint64_t j = 0; j < k; ++j) StoreValue(v.data(), j, x[j], f);
    values.push_back(v.data());
  }
  const std::vector<uint32_t> indices = Reference(seed, step, n, k);
  std::vector<float> want(n, 0.0f);
  for (uint64_t j = 0; j < k; ++j) {
    float sum = 0.0f;
    for (size_t r = 0; r < p; ++r) sum += LoadValue(values[r], j, f);
    want[indices[j]] = sum / divisor;
  }
  uint64_t temp_bytes = 0;
  RandomKDecodeAverage(nullptr, &temp_bytes, seed, step, n, k, nullptr, 0, f, divisor, nullptr);
  std::vector<uint64_t> temp(temp_bytes / 8 + 1, ~uint64_t{0});  // stale bits must not count
  std::vector<float> got(n + 1, 42.0f);
  RandomKDecodeAverage(temp.data(), &temp_bytes, seed, step, n, k, values.data(), p, f, divisor,
                       got.data());
  EXPECT_EQ(FloatBits(got.back()), FloatBits(42.0f));  // nothing written past n
  got.pop_back();
  EXPECT_EQ(AsBits(want), AsBits(got));
}

// Every build (this test runs in each: randomk_test, _baseline, _v3), the
// bitmap and the hashed-forward selection, every format, a divisor taken
// as a multiply (4) and one divided (3).
TEST(RandomKTest, AverageIsTheSumOfEachEntryInOrderDivided) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 15ull, 16ull, 17ull, 1000ull, 4099ull, 20011ull}) {
    for (uint64_t k : {uint64_t{0}, n, n / 2, n / 40, n > 0 ? rng() % n : 0}) {
      for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
        for (size_t p : {0u, 1u, 4u, 5u}) CheckAverage(n, k, p, f, 4.0f, rng);
        CheckAverage(n, k, 3, f, 3.0f, rng);
      }
    }
  }
  // Hashed forward: a bitmap past 256 KiB, denser than 1/32.
  const uint64_t n = (uint64_t{1} << 21) + 1001;
  CheckAverage(n, n / 10, 4, ValueFormat::kFp32, 4.0f, rng);
  CheckAverage(n, n / 3, 3, ValueFormat::kFp32, 3.0f, rng);
  CheckAverage(n, n / 10, 2, ValueFormat::kBf16, 2.0f, rng);
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
