// Exact and approximate top-k kernels against a full sort.
#include "gradwire/kernels/cpu/topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/topk_sample.h"
#include "tests/same_bits.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

enum class Data { kNormal, kHeavyTail, kTies, kNonFinite, kAllEqual };

std::vector<float> MakeData(Data kind, uint64_t n, std::mt19937_64& rng) {
  std::vector<float> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t i = 0; i < n; ++i) {
    switch (kind) {
      case Data::kNormal:
        v[i] = normal(rng);
        break;
      case Data::kHeavyTail:
        v[i] = normal(rng) / (0.05f + std::fabs(normal(rng)));
        break;
      case Data::kTies:
        v[i] = static_cast<float>(static_cast<int>(rng() % 7) - 3);
        break;
      case Data::kAllEqual:
        v[i] = -0.5f;
        break;
      case Data::kNonFinite: {
        const uint64_t r = rng() % 20;
        v[i] = r == 0   ? std::nanf("")
               : r == 1 ? std::numeric_limits<float>::infinity()
               : r == 2 ? -std::numeric_limits<float>::infinity()
                        : normal(rng);
        break;
      }
    }
  }
  return v;
}

// The reference: indices stably sorted by key descending (so ties keep
// the lower index first); the top k are its first k, ascending. Sorting
// once per vector keeps the test fast under sanitizers.
std::vector<uint32_t> RankedOrder(const std::vector<float>& acc) {
  std::vector<uint32_t> idx(acc.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    return MagnitudeKey(acc[a]) > MagnitudeKey(acc[b]);
  });
  return idx;
}

std::vector<uint32_t> TopKFromOrder(const std::vector<uint32_t>& order, uint64_t k) {
  std::vector<uint32_t> top(order.begin(), order.begin() + k);
  std::sort(top.begin(), top.end());
  return top;
}

struct Output {
  std::vector<uint32_t> indices;
  std::vector<uint8_t> values;
  std::vector<float> residual;
  FusedStats stats;
  ApproxTopKBand band;
};

// With `in_temp`, the outputs are left where TopKOutputsInTemp says (the
// emit compacts the candidate lists in place) and copied out after.
Output RunSelectOnce(bool approx, const std::vector<float>& grad,
                     const std::vector<float>* residual, uint64_t k, ValueFormat format,
                     bool in_temp) {
  Output out;
  const uint64_t n = grad.size();
  uint64_t temp_bytes = 0;
  if (approx) {
    ApproxTopKCompress(nullptr, &temp_bytes, nullptr, nullptr, n, k, format, nullptr, nullptr,
                       nullptr, nullptr);
  } else {
    TopKCompress(nullptr, &temp_bytes, nullptr, nullptr, n, k, format, nullptr, nullptr, nullptr);
  }
  std::vector<uint64_t> temp(temp_bytes / 8 + 1);
  out.indices.assign(k, 0xffffffffu);
  out.values.assign(k * ValueWidth(format), 0);
  if (residual != nullptr) out.residual = *residual;
  float* res = residual != nullptr ? out.residual.data() : nullptr;
  uint32_t* indices = out.indices.data();
  uint8_t* values = out.values.data();
  if (in_temp) {
    const OutputsInTemp there = TopKOutputsInTemp(temp.data(), n);
    indices = there.indices;
    values = there.values;
  }
  if (approx) {
    ApproxTopKCompress(temp.data(), &temp_bytes, grad.data(), res, n, k, format, indices, values,
                       &out.stats, &out.band);
  } else {
    TopKCompress(temp.data(), &temp_bytes, grad.data(), res, n, k, format, indices, values,
                 &out.stats);
  }
  if (in_temp) {
    std::copy(indices, indices + k, out.indices.begin());
    std::copy(values, values + k * ValueWidth(format), out.values.begin());
  }
  return out;
}

// The selection into buffers of its own; every call also runs with the
// outputs inside temp, which must give the same bits (outputs, residual,
// stats and band).
Output RunSelect(bool approx, const std::vector<float>& grad, const std::vector<float>* residual,
                 uint64_t k, ValueFormat format) {
  Output out = RunSelectOnce(approx, grad, residual, k, format, /*in_temp=*/false);
  const Output there = RunSelectOnce(approx, grad, residual, k, format, /*in_temp=*/true);
  EXPECT_EQ(there.indices, out.indices) << "outputs in temp";
  EXPECT_EQ(there.values, out.values) << "outputs in temp";
  EXPECT_EQ(there.stats.selected, out.stats.selected);
  EXPECT_EQ(there.stats.nonfinite, out.stats.nonfinite);
  EXPECT_EQ(there.band.lower_key, out.band.lower_key);
  EXPECT_EQ(there.band.upper_key, out.band.upper_key);
  EXPECT_EQ(there.band.above, out.band.above);
  EXPECT_EQ(there.band.in_band, out.band.in_band);
  if (residual != nullptr) {
    EXPECT_TRUE(testing::SameBits(there.residual, out.residual))
        << "outputs in temp: the residuals differ";
  }
  return out;
}

// Checks values and the fused residual for a selection `chosen` (ascending).
void CheckValuesAndResidual(const Output& out, const std::vector<float>& acc, bool has_residual,
                            ValueFormat format) {
  std::vector<char> selected(acc.size(), 0);
  for (size_t j = 0; j < out.indices.size(); ++j) {
    const uint32_t idx = out.indices[j];
    ASSERT_LT(idx, acc.size());
    if (j > 0) {
      ASSERT_LT(out.indices[j - 1], idx);
    }
    selected[idx] = 1;
    const float want = RoundToFormat(acc[idx], format);
    const float got = LoadValue(out.values.data(), j, format);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(FloatBits(got), FloatBits(want)) << "j=" << j;
    }
  }
  if (!has_residual) return;
  for (size_t i = 0; i < acc.size(); ++i) {
    const float decoded = selected[i] ? RoundToFormat(acc[i], format) : 0.0f;
    // e_new == fl(acc - decoded), non-finite reset to 0.
    const float want = ResidualAfter(acc[i], decoded);
    ASSERT_EQ(FloatBits(out.residual[i]), FloatBits(want)) << "i=" << i;
    if (std::isfinite(acc[i]) && format == ValueFormat::kFp32) {
      ASSERT_EQ(FloatBits(decoded + out.residual[i]), FloatBits(acc[i] + 0.0f)) << i;
    }
  }
}

// Approximate top-k's selection given its band: every element above the
// band, then the band's members in index order until there are k; a
// function of acc and k alone (it is also the GPU kernel's contract).
std::vector<uint32_t> BandFill(const std::vector<float>& acc, uint64_t k,
                               const ApproxTopKBand& band) {
  std::vector<uint32_t> want;
  if (k == 0) return want;
  uint64_t fill = k - band.above;
  for (uint64_t i = 0; i < acc.size(); ++i) {
    const uint32_t key = MagnitudeKey(acc[i]);
    if (key >= band.upper_key || (key >= band.lower_key && fill > 0 && fill--)) {
      want.push_back(static_cast<uint32_t>(i));
    }
  }
  return want;
}

struct Case {
  Data data;
  uint64_t n;
};

std::vector<uint64_t> Ks(uint64_t n, std::mt19937_64& rng) {
  std::vector<uint64_t> ks = {0, n};
  if (n > 0) ks.insert(ks.end(), {1, n / 1000 + 1, n / 100 + 1, n / 2, n - 1, rng() % n});
  return ks;
}

TEST(TopKTest, ExactlyTheKLargestMagnitudesVersusFullSort) {
  GRADWIRE_SEEDED_RNG(rng);
  const Case cases[] = {{Data::kNormal, 0},    {Data::kNormal, 1},       {Data::kNormal, 7},
                        {Data::kNormal, 1000}, {Data::kNormal, 100003},  {Data::kHeavyTail, 65537},
                        {Data::kTies, 5000},   {Data::kNonFinite, 3001}, {Data::kAllEqual, 2049}};
  for (const Case& c : cases) {
    for (bool with_residual : {false, true}) {
      const std::vector<float> grad = MakeData(c.data, c.n, rng);
      std::vector<float> residual = MakeData(Data::kNormal, c.n, rng);
      for (float& r : residual) r *= 0.1f;
      std::vector<float> acc(c.n);
      for (uint64_t i = 0; i < c.n; ++i) acc[i] = with_residual ? grad[i] + residual[i] : grad[i];
      const std::vector<uint32_t> order = RankedOrder(acc);
      for (uint64_t k : Ks(c.n, rng)) {
        const std::vector<uint32_t> want = TopKFromOrder(order, k);
        for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
          SCOPED_TRACE(::testing::Message()
                       << "data " << static_cast<int>(c.data) << " n " << c.n << " k " << k
                       << " format " << static_cast<int>(f) << " ef " << with_residual);
          const Output out = RunSelect(false, grad, with_residual ? &residual : nullptr, k, f);
          ASSERT_EQ(out.indices, want);
          ASSERT_EQ(out.stats.selected, k);
          CheckValuesAndResidual(out, acc, with_residual, f);
        }
      }
    }
  }
}

// Above 128K elements the kernels estimate a candidate bound from a
// sample; the result must not depend on how good the estimate was.
TEST(TopKTest, SampledPathMatchesFullSortIncludingWhenTheSampleMisleads) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = (1 << 21) + 77;
  std::vector<float> grad = MakeData(Data::kHeavyTail, n, rng);
  const std::vector<uint32_t> order = RankedOrder(grad);
  for (uint64_t k : {uint64_t{1}, n / 1000, n / 100}) {
    SCOPED_TRACE(::testing::Message() << "heavy tail, k " << k);
    const Output out = RunSelect(false, grad, nullptr, k, ValueFormat::kFp32);
    ASSERT_EQ(out.indices, TopKFromOrder(order, k));
  }
  // Make exactly the sampled positions the largest: the sampled bound
  // then admits fewer than k candidates, and the kernel must fall back to
  // considering everything. Below 4M elements exact top-k samples 4096
  // elements and approximate top-k 16384 (topk.cc), each at one scrambled
  // offset per stride n / s.
  std::normal_distribution<float> normal;
  for (bool approx : {false, true}) {
    const uint64_t s = approx ? 16384 : 4096;
    for (float& g : grad) g = normal(rng);
    const uint64_t stride = n / s;
    for (uint64_t j = 0; j < s; ++j) {
      grad[j * stride + static_cast<uint64_t>((static_cast<unsigned __int128>(Mix64(j)) * stride) >>
                                              64)] = 1000.0f + j;
    }
    std::vector<float> residual(n, 0.0f);
    const std::vector<uint32_t> adversarial_order = RankedOrder(grad);
    for (uint64_t k : {uint64_t{100}, uint64_t{20000}}) {
      for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kBf16}) {
        SCOPED_TRACE(::testing::Message() << "adversarial, approx " << approx << " k " << k
                                          << " format " << static_cast<int>(f));
        const Output out = RunSelect(approx, grad, &residual, k, f);
        ASSERT_EQ(out.indices,
                  approx ? BandFill(grad, k, out.band) : TopKFromOrder(adversarial_order, k));
        ASSERT_EQ(out.indices.size(), k);
        CheckValuesAndResidual(out, grad, true, f);
      }
    }
  }
}

TEST(TopKTest, SampledPathAtHighDensityInEveryFormat) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = (1 << 18) + 3;
  for (Data data : {Data::kNormal, Data::kTies, Data::kNonFinite}) {
    const std::vector<float> grad = MakeData(data, n, rng);
    std::vector<float> residual = MakeData(Data::kNormal, n, rng);
    for (float& r : residual) r *= 0.01f;
    std::vector<float> acc(n);
    for (uint64_t i = 0; i < n; ++i) acc[i] = grad[i] + residual[i];
    const std::vector<uint32_t> order = RankedOrder(acc);
    for (uint64_t k : {n / 50, n / 10 + 5, n / 4}) {
      for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
        SCOPED_TRACE(::testing::Message() << "data " << static_cast<int>(data) << " k " << k
                                          << " format " << static_cast<int>(f));
        const Output exact = RunSelect(false, grad, &residual, k, f);
        ASSERT_EQ(exact.indices, TopKFromOrder(order, k));
        CheckValuesAndResidual(exact, acc, true, f);
        const Output approx = RunSelect(true, grad, &residual, k, f);
        ASSERT_EQ(approx.indices, BandFill(acc, k, approx.band));
        CheckValuesAndResidual(approx, acc, true, f);
      }
    }
  }
}

TEST(TopKTest, TiesGoToLowerIndexAndNanIsNeverPreferred) {
  // Four equal magnitudes, k = 2: the two lowest indices win, whatever the sign.
  std::vector<float> g = {1.0f, -2.0f, 2.0f, std::nanf(""), -2.0f, 2.0f, 0.0f};
  Output out = RunSelect(false, g, nullptr, 2, ValueFormat::kFp32);
  EXPECT_EQ(out.indices, (std::vector<uint32_t>{1, 2}));
  // k = 6: everything but the NaN (zero outranks it).
  out = RunSelect(false, g, nullptr, 6, ValueFormat::kFp32);
  EXPECT_EQ(out.indices, (std::vector<uint32_t>{0, 1, 2, 4, 5, 6}));
  // Inf outranks everything; its residual (Inf - Inf) is reset to 0.
  std::vector<float> h = {1.0f, std::numeric_limits<float>::infinity(), 5.0f};
  std::vector<float> r = {0.0f, 0.0f, 0.0f};
  out = RunSelect(false, h, &r, 1, ValueFormat::kFp32);
  EXPECT_EQ(out.indices, (std::vector<uint32_t>{1}));
  EXPECT_EQ(out.residual, (std::vector<float>{1.0f, 0.0f, 5.0f}));
  EXPECT_EQ(out.stats.nonfinite, 1u);
  // A NaN residual does not survive the step.
  std::vector<float> rn = {std::nanf(""), 0.0f, 0.0f};
  out = RunSelect(false, h, &rn, 2, ValueFormat::kFp32);
  EXPECT_EQ(out.residual[0], 0.0f);
}

TEST(ApproxTopKTest, SelectsExactlyKWithinTheStatedBand) {
  GRADWIRE_SEEDED_RNG(rng);
  const Case cases[] = {{Data::kNormal, 0},        {Data::kNormal, 5},  {Data::kNormal, 300007},
                        {Data::kHeavyTail, 65537}, {Data::kTies, 5000}, {Data::kNonFinite, 3001}};
  for (const Case& c : cases) {
    const std::vector<float> grad = MakeData(c.data, c.n, rng);
    std::vector<float> residual = MakeData(Data::kNormal, c.n, rng);
    std::vector<float> acc(c.n);
    for (uint64_t i = 0; i < c.n; ++i) acc[i] = grad[i] + residual[i];
    const std::vector<uint32_t> order = RankedOrder(acc);
    for (uint64_t k : Ks(c.n, rng)) {
      SCOPED_TRACE(::testing::Message() << "n " << c.n << " k " << k);
      const Output out = RunSelect(true, grad, &residual, k, ValueFormat::kFp32);
      ASSERT_EQ(out.indices.size(), k);
      ASSERT_EQ(out.indices, BandFill(acc, k, out.band));
      ASSERT_EQ(out.stats.selected, k);
      CheckValuesAndResidual(out, acc, true, ValueFormat::kFp32);
      if (k == 0) continue;
      std::vector<char> selected(c.n, 0);
      for (uint32_t idx : out.indices) selected[idx] = 1;
      for (uint64_t i = 0; i < c.n; ++i) {
        const uint32_t key = MagnitudeKey(acc[i]);
        if (selected[i]) {
          ASSERT_GE(key, out.band.lower_key) << i;
        } else {
          ASSERT_LT(key, out.band.upper_key) << i;
        }
      }
      // The stated magnitude tolerance against the exact k-th largest.
      const std::vector<uint32_t> exact = TopKFromOrder(order, k);
      uint32_t kth_key = kMaxMagnitudeKey + 1;
      for (uint32_t idx : exact) kth_key = std::min(kth_key, MagnitudeKey(acc[idx]));
      const float kth = BitsFloat(kth_key - 1);
      if (std::isfinite(kth) && kth >= std::numeric_limits<float>::min()) {
        for (uint64_t i = 0; i < c.n; ++i) {
          if (!std::isfinite(acc[i])) continue;
          if (selected[i]) {
            ASSERT_GT(std::fabs(acc[i]) * 1.1251f, kth) << i;
          } else {
            ASSERT_LT(std::fabs(acc[i]), kth * 1.1251f) << i;
          }
        }
      }
    }
  }
}

// The guess approximate top-k's pass zeroes residuals by: the bins above
// the likeliest band, and the band below an index halfway between the
// sampled members its fill takes last and leaves first, rounded up to a
// block of the pass.
TEST(TopKSampleTest, BandGuessCutsHalfwayBetweenTheSampledFillsLastAndNextMember) {
  constexpr uint32_t kBin = 100;
  const uint32_t band = kBin << internal::kTopShift;
  const uint32_t above = (kBin + 1) << internal::kTopShift;
  const uint32_t below = (kBin - 1) << internal::kTopShift;
  // Sample j sits at index 1000 j; in index order: two keys above the
  // band, band members at j = 1, 4, 6, 9, the rest below it.
  std::vector<uint32_t> sample(12, below + 5);
  sample[0] = above + 7;
  sample[7] = above;
  for (uint64_t j : {1, 4, 6, 9}) sample[j] = band + static_cast<uint32_t>(j);
  const auto at = [](uint64_t j) { return 1000 * j; };
  const uint64_t n = 12000;
  // The (likely + 1)-th largest key is a band member; the fill takes
  // likely + 1 - 2 of the band's sampled members.
  for (uint64_t likely = 2; likely <= 5; ++likely) {
    SCOPED_TRACE(::testing::Message() << "likely " << likely);
    const internal::ZeroGuess g =
        internal::GuessBandFill(sample.data(), sample.size(), likely, band + 1, n, at);
    EXPECT_EQ(g.band, band);
    EXPECT_EQ(g.from, above);
    const uint64_t members[] = {1000, 4000, 6000, 9000};
    const uint64_t take = likely + 1 - 2;
    const uint64_t cut =
        take < 4 ? members[take - 1] + (members[take] - members[take - 1]) / 2 + 1 : n;
    EXPECT_EQ(g.before, (cut + 31) / 32 * 32);
    EXPECT_EQ(g.before % internal::kGuessBlock, 0u);
  }
}

// Which residuals the pass zeroes is a guess that only changes speed: with
// magnitudes that rise or fall along the index (the band's fill ends early
// or late in index order) or come in layers of different scales, at
// densities from 0.1 % to a third, the selection and every residual are
// the band fill's.
TEST(ApproxTopKTest, SampledGuessOfTheBandFillNeverChangesTheResult) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 262147;  // sampled: >= 8 * kSampleSize
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int shape = 0; shape < 3; ++shape) {
    std::vector<float> grad(n), residual(n), acc(n);
    for (uint64_t i = 0; i < n; ++i) {
      const float ramp = 1.0f + static_cast<float>(i) / static_cast<float>(n);
      const float layer = static_cast<float>(1 + (i / 4096) % 3);
      const float x = normal(rng);
      grad[i] = shape == 0 ? x * ramp : shape == 1 ? x / ramp : x * layer;
      residual[i] = 0.1f * normal(rng);
      acc[i] = grad[i] + residual[i];
    }
    for (uint64_t k : {n / 1000, n / 100, n / 10, n / 3}) {
      SCOPED_TRACE(::testing::Message() << "shape " << shape << " k " << k);
      const Output out = RunSelect(true, grad, &residual, k, ValueFormat::kFp32);
      ASSERT_EQ(out.indices, BandFill(acc, k, out.band));
      CheckValuesAndResidual(out, acc, true, ValueFormat::kFp32);
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
