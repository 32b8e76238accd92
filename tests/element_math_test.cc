#include "gradwire/kernels/element_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

float RandomBitsFloat(std::mt19937_64& rng) { return BitsFloat(static_cast<uint32_t>(rng())); }

TEST(HalfTest, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalfBits(f), h) << std::hex << h;
    // Agrees with the compiler's own conversion.
    const uint16_t h16 = static_cast<uint16_t>(h);
    _Float16 ref;
    std::memcpy(&ref, &h16, 2);
    EXPECT_EQ(FloatBits(f), FloatBits(static_cast<float>(ref)));
  }
}

TEST(HalfTest, MatchesCompilerRoundToNearestEvenBelowOverflow) {
  GRADWIRE_SEEDED_RNG(rng);
  for (int i = 0; i < 2000000; ++i) {
    float f = RandomBitsFloat(rng);
    if (i & 1) {  // half the draws in fp16's own range
      f = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                     static_cast<int>(rng() % 42) - 26);
    }
    if (std::isnan(f) || std::fabs(f) >= 65520.0f) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(FloatToHalfBits(f), ref_bits) << f;
  }
  // Dense sweep through the subnormal and normal boundary region.
  for (uint32_t bits = 0x33000000u; bits < 0x39000000u; bits += 97) {
    const float f = BitsFloat(bits);
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(FloatToHalfBits(f), ref_bits) << std::hex << bits;
  }
}

TEST(HalfTest, SaturatesFiniteOverflowKeepsInfAndNan) {
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7bff);  // IEEE would round to inf
  EXPECT_EQ(FloatToHalfBits(1e30f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(-1e30f), 0xfbff);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(std::nanf("")))));
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(FloatToHalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
}

TEST(Bf16Test, RoundsToNearestEvenAndSaturates) {
  GRADWIRE_SEEDED_RNG(rng);
  for (int i = 0; i < 1000000; ++i) {
    const float f = RandomBitsFloat(rng);
    const uint16_t b = FloatToBf16Bits(f);
    const float back = Bf16BitsToFloat(b);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(back));
      continue;
    }
    if (std::isinf(f)) {
      ASSERT_EQ(FloatBits(back), FloatBits(f));
      continue;
    }
    ASSERT_TRUE(std::isfinite(back)) << f;  // saturation
    // Nearest among the neighbours, ties to even mantissa.
    const double err = std::fabs(static_cast<double>(back) - f);
    for (int d : {-1, 1}) {
      const uint16_t nb = static_cast<uint16_t>(b + d);
      const float other = Bf16BitsToFloat(nb);
      if (!std::isfinite(other) || (nb & 0x7fff) == 0 || ((nb ^ b) & 0x8000)) continue;
      const double oerr = std::fabs(static_cast<double>(other) - f);
      ASSERT_TRUE(err < oerr || (err == oerr && (b & 1) == 0) ||
                  (std::fabs(f) >= 3.3895313892515355e38 && (b & 0x7fff) == kBf16MaxBits))
          << f;
    }
  }
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::max()), kBf16MaxBits);
  EXPECT_EQ(FloatToBf16Bits(-std::numeric_limits<float>::max()), 0x8000 | kBf16MaxBits);
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80);
}

TEST(MagnitudeKeyTest, OrdersNanLowestThenMagnitudesThenInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(MagnitudeKey(std::nanf("")), 0u);
  EXPECT_EQ(MagnitudeKey(-std::nanf("")), 0u);
  EXPECT_LT(MagnitudeKey(std::nanf("")), MagnitudeKey(0.0f));
  EXPECT_EQ(MagnitudeKey(0.0f), MagnitudeKey(-0.0f));
  EXPECT_LT(MagnitudeKey(0.0f), MagnitudeKey(1e-45f));
  EXPECT_EQ(MagnitudeKey(inf), kMaxMagnitudeKey);
  EXPECT_EQ(MagnitudeKey(-inf), kMaxMagnitudeKey);
  GRADWIRE_SEEDED_RNG(rng);
  for (int i = 0; i < 100000; ++i) {
    const float a = RandomBitsFloat(rng), b = RandomBitsFloat(rng);
    if (std::isnan(a) || std::isnan(b)) continue;
    ASSERT_EQ(std::fabs(a) < std::fabs(b), MagnitudeKey(a) < MagnitudeKey(b)) << a << " " << b;
  }
}

TEST(ElementHashTest, KeysAreDeterministicAndDistinctPerStream) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t seed = rng(), step = rng() % 1000;
  const uint64_t key = StreamKey(seed, step, kStreamRandomK);
  EXPECT_EQ(key, StreamKey(seed, step, kStreamRandomK));
  EXPECT_NE(key, StreamKey(seed, step + 1, kStreamRandomK));
  EXPECT_NE(key, StreamKey(seed, step, kStreamRounding));
  EXPECT_EQ(RandomKHashBits(0), kMinHashBits);
  EXPECT_EQ(RandomKHashBits(65536), 16u);
  EXPECT_EQ(RandomKHashBits(65537), 17u);
  EXPECT_EQ(RandomKHashBits(uint64_t{1} << 32), 32u);
  EXPECT_EQ(RandomKElementKey(seed, step, 1000).bits, 16u);
}

// For every width, each key's hash is a bijection and ElementHashInverse
// undoes it (random-k's CPU path relies on both).
TEST(ElementHashTest, BijectionWithInverseAtEveryWidth) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = kMinHashBits; bits <= 32; ++bits) {
    const ElementKey key = MakeElementKey(rng(), bits);
    for (int t = 0; t < 20000; ++t) {
      const uint32_t i = static_cast<uint32_t>(rng()) & key.mask;
      const uint32_t h = ElementHash(key, i);
      ASSERT_LE(h, key.mask);
      ASSERT_EQ(ElementHashInverse(key, h), i) << "bits " << bits;
    }
  }
  const ElementKey key = MakeElementKey(rng(), 16);
  std::vector<bool> seen(65536, false);
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint32_t h = ElementHash(key, i);
    ASSERT_FALSE(seen[h]) << i;
    seen[h] = true;
  }
}

// Over consecutive indices of one key (what a kernel call uses), every
// output bit is set half of the time, UnitFloat is uniform (16 cells,
// chi-square), and flipping any one input bit flips each output bit half
// of the time (avalanche).
TEST(ElementHashTest, UniformBitsAndAvalancheOverIndices) {
  GRADWIRE_SEEDED_RNG(rng);
  const int kSamples = 1 << 17;
  for (uint32_t bits : {16u, 21u, 32u}) {
    SCOPED_TRACE(::testing::Message() << "bits " << bits);
    const ElementKey key = MakeElementKey(StreamKey(rng(), rng() % 1000, kStreamRounding), bits);
    const uint64_t first = rng() & key.mask;
    std::vector<int> ones(bits, 0), cells(16, 0);
    for (int i = 0; i < kSamples; ++i) {
      const uint32_t h = ElementHash(key, first + i);
      for (uint32_t b = 0; b < bits; ++b) ones[b] += (h >> b) & 1;
      ++cells[(h << (32 - bits)) >> 28];
    }
    // sd of a bit count: sqrt(kSamples) / 2 = 181.
    for (uint32_t b = 0; b < bits; ++b) EXPECT_NEAR(ones[b], kSamples / 2, 6 * 181) << "bit " << b;
    double chi2 = 0;
    for (int c : cells) chi2 += (c - kSamples / 16.0) * (c - kSamples / 16.0) / (kSamples / 16.0);
    EXPECT_LT(chi2, 50.0);    // 15 dof
    const int kPairs = 4000;  // per input bit: sd of a flip count 32
    for (uint32_t in = 0; in < bits; ++in) {
      std::vector<int> flips(bits, 0);
      for (int t = 0; t < kPairs; ++t) {
        const uint32_t i = static_cast<uint32_t>(rng()) & key.mask;
        const uint32_t d = ElementHash(key, i) ^ ElementHash(key, i ^ (1u << in));
        for (uint32_t b = 0; b < bits; ++b) flips[b] += (d >> b) & 1;
      }
      for (uint32_t b = 0; b < bits; ++b) {
        ASSERT_NEAR(flips[b], kPairs / 2, 6 * 32) << "input bit " << in << " output bit " << b;
      }
    }
  }
}

// One index's hashes at two steps (or under two seeds) are independent:
// the joint distribution of their top 4 bits is uniform over 256 cells,
// and each index's UnitFloat over steps has mean 1/2.
TEST(ElementHashTest, IndependentAcrossStepsAndSeeds) {
  GRADWIRE_SEEDED_RNG(rng);
  for (bool across_seeds : {false, true}) {
    SCOPED_TRACE(across_seeds ? "seeds" : "steps");
    const uint64_t seed = rng();
    std::vector<int> cells(256, 0);
    const int kSteps = 256, kIndices = 512;
    std::vector<double> mean(kIndices, 0.0);
    for (int s = 0; s < kSteps; ++s) {
      const ElementKey a = across_seeds ? RoundingKey(seed + 2 * s, 5) : RoundingKey(seed, s);
      const ElementKey b =
          across_seeds ? RoundingKey(seed + 2 * s + 1, 5) : RoundingKey(seed, s + 1);
      for (int i = 0; i < kIndices; ++i) {
        const uint32_t ha = ElementHash(a, i), hb = ElementHash(b, i);
        ++cells[(ha >> 28) * 16 + (hb >> 28)];
        mean[i] += UnitFloat(ha) / kSteps;
      }
    }
    const double want = kSteps * kIndices / 256.0;  // 512 a cell
    double chi2 = 0;
    for (int c : cells) chi2 += (c - want) * (c - want) / want;
    EXPECT_LT(chi2, 255 + 8 * std::sqrt(2 * 255.0));
    // sd of a mean of 256 uniforms: 0.018.
    for (int i = 0; i < kIndices; ++i) ASSERT_NEAR(mean[i], 0.5, 6 * 0.018) << "index " << i;
  }
}

TEST(ElementHashTest, UnitFloatTakesTheTop24Bits) {
  EXPECT_EQ(UnitFloat(0), 0.0f);
  EXPECT_EQ(UnitFloat(0xffu), 0.0f);
  EXPECT_EQ(UnitFloat(0x100u), 5.9604644775390625e-8f);
  EXPECT_EQ(UnitFloat(0x80000000u), 0.5f);
  EXPECT_LT(UnitFloat(0xffffffffu), 1.0f);
}

TEST(QsgdMathTest, LevelsSpanScaleAndQuantizeIsUnbiased) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    const float scale = 3.5f;
    // The extreme levels: ±s exactly at one bit, within a float below s
    // (the step is rounded toward zero) otherwise.
    EXPECT_EQ(QsgdDequantize(0, scale, m), -QsgdDequantize(m, scale, m));
    EXPECT_LE(QsgdDequantize(m, scale, m), scale);
    EXPECT_GE(QsgdDequantize(m, scale, m), std::nextafter(scale, 0.0f));
    if (bits == 1) {
      EXPECT_EQ(QsgdDequantize(1, scale, m), scale);
    }
    EXPECT_EQ(QsgdDequantize(m, 0.0f, m), 0.0f);
    EXPECT_FALSE(std::isnan(QsgdDequantize(QsgdQuantizeScaled(0.0f, 0.0f, m, 0.5f), 0.0f, m)));
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (int t = 0; t < 20; ++t) {
      const float x = dist(rng);
      const int kDraws = 20000;
      double sum = 0;
      for (int d = 0; d < kDraws; ++d) {
        const uint32_t code = QsgdQuantizeScaled(x, scale, m, UnitFloat(rng()));
        ASSERT_LE(code, m);
        const float v = QsgdDequantize(code, scale, m);
        ASSERT_LE(std::fabs(v - x), 2 * scale / m * 1.0001f) << x << " bits " << bits;
        sum += v;
      }
      // Per-draw variance <= (scale/m)^2: 5 standard errors.
      EXPECT_NEAR(sum / kDraws, x, 5 * (scale / m) / std::sqrt(double{kDraws}) + 1e-6)
          << "bits " << bits;
    }
  }
}

// QSGD's levels (element_math.h): RN((2q - M) * step), the step s / M
// rounded toward zero. For scales across the range (subnormal to
// FLT_MAX) and every width and code: the step is RZ(s / M) (M * step <= s
// < M * next float, exactly in double), every level is odd in 2q - M,
// never above s in magnitude (no overflow at FLT_MAX), and within 2^-22 s
// of (2q - M) s / M (plus M subnormal floats where the step is
// subnormal); at one bit the levels are exactly ±s.
TEST(QsgdMathTest, LevelsAreOddBoundedByTheScaleAndNearTheExactGrid) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<float> scales = {std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(),
                               1e-40f,
                               1.0f,
                               3.5f,
                               0.1f,
                               3e38f};
  for (int i = 0; i < 200; ++i) {
    // Random bit patterns of finite positive floats.
    scales.push_back(BitsFloat(1u + static_cast<uint32_t>(rng()) % 0x7f7fffffu));
  }
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    for (float s : scales) {
      const float step = QsgdLevelStep(s, m);
      ASSERT_GE(step, 0.0f);
      ASSERT_LE(double{step} * m, double{s}) << s << " bits " << bits;
      ASSERT_GT(double{std::nextafter(step, std::numeric_limits<float>::infinity())} * m,
                double{s})
          << s << " bits " << bits;
      for (uint32_t q = 0; q <= m; ++q) {
        const float level = QsgdDequantize(q, s, m);
        ASSERT_EQ(FloatBits(level), FloatBits(QsgdLevel(q, step, m)));
        ASSERT_EQ(FloatBits(level), FloatBits(-QsgdDequantize(m - q, s, m)))
            << s << " bits " << bits << " code " << q;
        ASSERT_TRUE(std::isfinite(level));
        ASSERT_LE(std::fabs(level), s) << s << " bits " << bits << " code " << q;
        const double exact = (2.0 * q - m) * double{s} / m;
        // Subnormal steps lose bits: M subnormal floats more there.
        ASSERT_LE(std::fabs(level - exact),
                  double{s} * std::ldexp(1.0, -22) + std::ldexp(1.0, -148) * m)
            << s << " bits " << bits << " code " << q;
        if (bits == 1) {
          ASSERT_EQ(level, q == 0 ? -s : s);
        }
      }
    }
  }
  EXPECT_EQ(QsgdLevelStep(0.0f, 255), 0.0f);
}

// QsgdGridFor: c is M / (2s) rounded toward zero, wherever it is a
// normal float, and the grid divides exactly where RN(M / (2s)) is not one.
// Every |x| <= s then lies in [0, M] on the grid, the clamps unneeded.
TEST(QsgdGridTest, PerUnitRoundsTowardZeroAndKeepsPositionsInRange) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<float> scales = {1.0f,
                               3.5f,
                               1e-45f,
                               1e-40f,
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::max(),
                               1e38f,
                               0.1f};
  for (int i = 0; i < 4000; ++i) {
    // Any positive finite float, every exponent alike.
    scales.push_back(BitsFloat(1u + static_cast<uint32_t>(rng() % 0x7f7fffffu)));
  }
  int divided = 0, multiplied = 0;
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    const double half = 0.5 * m;
    for (const float s : scales) {
      const QsgdGrid g = QsgdGridFor(s, m);
      ASSERT_EQ(g.scale, s);
      ASSERT_EQ(g.half, static_cast<float>(half));
      const float rn = static_cast<float>(half) / s;
      const bool normal = std::isnormal(rn);
      if (!normal) {
        ASSERT_TRUE(g.by_division) << s << " bits " << bits;
        ++divided;
      } else if (!g.by_division) {
        ++multiplied;
        ASSERT_TRUE(std::isnormal(g.per_unit));
        // c <= M / (2s) < next float above c.
        ASSERT_LE(static_cast<double>(g.per_unit) * s, half) << s << " bits " << bits;
        const float up = std::nextafter(g.per_unit, std::numeric_limits<float>::infinity());
        ASSERT_GT(static_cast<double>(up) * s, half) << s << " bits " << bits;
      } else {
        // Only RZ's step below the smallest normal may divide here.
        ASSERT_EQ(rn, std::numeric_limits<float>::min()) << s << " bits " << bits;
      }
      std::uniform_real_distribution<float> unit(-1.0f, 1.0f);  // (-s, s) overflows at FLT_MAX
      const float prev = std::nextafter(s, 0.0f);
      for (const float x : {s, -s, prev, -prev, 0.0f, -0.0f, s * unit(rng), s * unit(rng)}) {
        const float t = QsgdPosition(x, g);
        ASSERT_GE(t, 0.0f) << x << " scale " << s << " bits " << bits;
        ASSERT_LE(t, static_cast<float>(m)) << x << " scale " << s << " bits " << bits;
      }
      // The ends of the range lie within M * 2^-24 of the end levels (c
      // is one rounding below M / (2s)), so they take the end codes but
      // for the rarest u; zero sits at M/2 exactly on either grid.
      ASSERT_EQ(QsgdQuantize(s, g, m, 0.999f), m) << s << " bits " << bits;
      ASSERT_EQ(QsgdQuantize(-s, g, m, 0.001f), 0u) << s << " bits " << bits;
      ASSERT_EQ(QsgdPosition(0.0f, g), static_cast<float>(half));
    }
  }
  // Both ways ran: the extremes divide, ordinary scales multiply.
  EXPECT_GT(divided, 100);
  EXPECT_GT(multiplied, 20000);
  EXPECT_TRUE(QsgdGridFor(1e-45f, 255).by_division);
  EXPECT_TRUE(QsgdGridFor(std::numeric_limits<float>::max(), 1).by_division);
  EXPECT_FALSE(QsgdGridFor(std::numeric_limits<float>::max(), 255).by_division);
  EXPECT_FALSE(QsgdGridFor(1.0f, 1).by_division);
}

// RoundingHash's uniforms: for pairs of elements d apart within one step
// (d from 1 to 4096), the joint histogram of their top four bits each
// (256 cells) is what independent uniforms give: the chi-square statistics
// of independence (expected counts from the histogram's own row and column
// sums, 15 x 15 degrees of freedom each) of all keys and distances, summed,
// at most five standard deviations above their mean. A single round on
// consecutive indices (no stride) came out eight above. Counted against
// uniform margins instead, every distance of a key shared that key's one
// marginal deviation, so the sum's spread was wider than its degrees of
// freedom say (a CI run came out at +5.03 of the assumed deviations).
TEST(RoundingHashTest, NeighboursLookIndependentWithinAStep) {
  GRADWIRE_SEEDED_RNG(rng);
  constexpr uint32_t kN = 1u << 22;
  const uint32_t kDistances[] = {1, 2, 3, 4, 8, 16, 256, 4096};
  std::vector<uint32_t> h(kN);
  double sum = 0;
  int stats = 0;
  for (int key_index = 0; key_index < 3; ++key_index) {
    const ElementKey key = RoundingKey(rng(), rng() % 1000);
    for (uint32_t i = 0; i < kN; ++i) h[i] = RoundingHash(key, i);
    std::vector<double> marginal(16, 0);
    for (uint32_t i = 0; i < kN; ++i) ++marginal[h[i] >> 28];
    for (double c : marginal) EXPECT_NEAR(c, kN / 16.0, 6 * std::sqrt(kN / 16.0));
    for (uint32_t d : kDistances) {
      std::vector<double> cells(256, 0);
      for (uint32_t i = 0; i + d < kN; ++i) ++cells[(h[i] >> 28) * 16 + (h[i + d] >> 28)];
      std::vector<double> first(16, 0), second(16, 0);
      for (int a = 0; a < 16; ++a) {
        for (int b = 0; b < 16; ++b) {
          first[a] += cells[a * 16 + b];
          second[b] += cells[a * 16 + b];
        }
      }
      const double pairs = kN - d;
      double chi = 0;
      for (int a = 0; a < 16; ++a) {
        for (int b = 0; b < 16; ++b) {
          const double expected = first[a] * second[b] / pairs;
          const double c = cells[a * 16 + b];
          chi += (c - expected) * (c - expected) / expected;
        }
      }
      sum += chi;
      ++stats;
    }
  }
  const double dof = 225.0 * stats;
  EXPECT_LT(sum, dof + 5 * std::sqrt(2 * dof)) << "over " << stats << " statistics";
  std::printf("chi-square %.0f for %.0f degrees of freedom (%+.2f deviations)\n", sum, dof,
              (sum - dof) / std::sqrt(2 * dof));
}

// Each index's rounding hash is exactly uniform over steps' keys (the
// adding key): over 2^16 keys, its top eight bits fill 256 cells evenly.
TEST(RoundingHashTest, UniformOverStepsAtEveryIndex) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t seed = rng();
  for (uint64_t index : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, uint64_t{0xffffffff}}) {
    std::vector<double> cells(256, 0);
    constexpr int kSteps = 1 << 16;
    for (int step = 0; step < kSteps; ++step) {
      ++cells[RoundingHash(RoundingKey(seed, step), index) >> 24];
    }
    double chi = 0;
    const double expected = kSteps / 256.0;
    for (double c : cells) chi += (c - expected) * (c - expected) / expected;
    EXPECT_LT(chi, 255 + 5 * std::sqrt(2 * 255.0)) << "index " << index;
  }
}

TEST(SignTest, ZeroIsPositive) {
  EXPECT_EQ(SignCode(0.0f), 0u);
  EXPECT_EQ(SignCode(-0.0f), 0u);
  EXPECT_EQ(SignCode(-1e-30f), 1u);
  EXPECT_EQ(SignDecode(0, 2.0f), 2.0f);
  EXPECT_EQ(SignDecode(1, 2.0f), -2.0f);
}

TEST(BitPackingTest, CodesRoundTripAtEveryWidth) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint64_t n = 1 + rng() % 1000;
    std::vector<uint32_t> codes(n);
    std::vector<uint8_t> packed(PackedBytes(n, bits), 0);
    for (uint64_t i = 0; i < n; ++i) {
      codes[i] = static_cast<uint32_t>(rng()) & QsgdMaxCode(bits);
      OrPackedCode(packed.data(), i, codes[i], bits);
    }
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(ReadPackedCode(packed.data(), i, bits), codes[i]);
    const uint32_t tail = static_cast<uint32_t>(n * bits % 8);
    if (tail) {
      EXPECT_EQ(packed.back() >> tail, 0);
    }
  }
}

TEST(ValueStorageTest, UnalignedLittleEndianRoundTrip) {
  uint8_t buf[16] = {};
  StoreValue(buf + 1, 0, 1.0f, ValueFormat::kFp32);
  EXPECT_EQ(buf[1], 0x00);
  EXPECT_EQ(buf[4], 0x3f);
  EXPECT_EQ(LoadValue(buf + 1, 0, ValueFormat::kFp32), 1.0f);
  StoreValue(buf + 3, 2, -2.0f, ValueFormat::kFp16);
  EXPECT_EQ(LoadValue(buf + 3, 2, ValueFormat::kFp16), -2.0f);
  StoreValue(buf + 3, 1, 3.0f, ValueFormat::kBf16);
  EXPECT_EQ(LoadValue(buf + 3, 1, ValueFormat::kBf16), 3.0f);
  EXPECT_EQ(RoundToFormat(1.0f + 1e-4f, ValueFormat::kBf16), 1.0f);
}

TEST(ResidualTest, NonFiniteResidualBecomesZero) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ResidualAfter(3.0f, 1.0f), 2.0f);
  EXPECT_EQ(ResidualAfter(inf, inf), 0.0f);
  EXPECT_EQ(ResidualAfter(inf, 1.0f), 0.0f);
  EXPECT_EQ(ResidualAfter(std::nanf(""), 0.0f), 0.0f);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
