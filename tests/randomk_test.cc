// Random-k: every rank derives the same indices from (seed, step).
#include "gradwire/kernels/cpu/randomk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

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

// Reference: the k smallest RandomKKey, ties to the lower index, ascending.
std::vector<uint32_t> Reference(uint64_t seed, uint64_t step, uint64_t n, uint64_t k) {
  const uint64_t key = StreamKey(seed, step, kStreamRandomK);
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](uint32_t a, uint32_t b) { return RandomKKey(key, a) < RandomKKey(key, b); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(RandomKTest, MatchesReferenceAndIsTheSameOnEveryRank) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 10ull, 4097ull, 100000ull}) {
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

TEST(RandomKTest, CompressFusesErrorFeedback) {
  GRADWIRE_SEEDED_RNG(rng);
  std::normal_distribution<float> normal;
  const uint64_t n = 50001, k = 777, seed = rng(), step = 3;
  std::vector<float> grad(n), residual(n), acc(n);
  for (uint64_t i = 0; i < n; ++i) {
    grad[i] = normal(rng);
    residual[i] = normal(rng);
    acc[i] = grad[i] + residual[i];
  }
  grad[5] = std::nanf("");
  acc[5] = grad[5] + residual[5];
  for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
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

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
