#include "gradwire/kernels/element_math.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(CounterHashTest, DeterministicAndUniform) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t seed = rng(), step = rng() % 1000;
  const uint64_t key = StreamKey(seed, step, kStreamRandomK);
  EXPECT_EQ(key, StreamKey(seed, step, kStreamRandomK));
  EXPECT_NE(key, StreamKey(seed, step + 1, kStreamRandomK));
  EXPECT_NE(key, StreamKey(seed, step, kStreamRounding));
  EXPECT_EQ(CounterHash(seed, step, kStreamRandomK, 12345), ElementHash(key, 12345));
  // 16 equal cells of UnitFloat: chi-square with 15 dof stays < 50 with
  // overwhelming probability for a decent hash.
  const int kSamples = 160000;
  std::vector<int> cells(16, 0);
  double mean = 0;
  for (int i = 0; i < kSamples; ++i) {
    const float u = UnitFloat(ElementHash(key, i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    mean += u;
    ++cells[static_cast<int>(u * 16)];
  }
  double chi2 = 0;
  for (int c : cells) chi2 += (c - kSamples / 16.0) * (c - kSamples / 16.0) / (kSamples / 16.0);
  EXPECT_LT(chi2, 50.0);
  EXPECT_NEAR(mean / kSamples, 0.5, 0.005);
}

TEST(QsgdMathTest, LevelsSpanScaleAndQuantizeIsUnbiased) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    const float scale = 3.5f;
    EXPECT_EQ(QsgdDequantize(0, scale, m), -scale);
    EXPECT_EQ(QsgdDequantize(m, scale, m), scale);
    EXPECT_EQ(QsgdDequantize(m, 0.0f, m), 0.0f);
    EXPECT_FALSE(std::isnan(QsgdDequantize(QsgdQuantize(0.0f, 0.0f, m, 0.5f), 0.0f, m)));
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (int t = 0; t < 20; ++t) {
      const float x = dist(rng);
      const int kDraws = 20000;
      double sum = 0;
      for (int d = 0; d < kDraws; ++d) {
        const uint32_t code = QsgdQuantize(x, scale, m, UnitFloat(rng()));
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
