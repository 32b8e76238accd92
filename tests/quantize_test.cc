// QSGD, sign and cast kernels: error bounds, unbiasedness, fused EF.
#include "gradwire/kernels/cpu/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

std::vector<float> Normal(uint64_t n, float sd, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

struct Quantized {
  std::vector<uint8_t> scales, packed;
  std::vector<float> residual, decoded;
};

Quantized RunQsgd(const std::vector<float>& grad, const std::vector<float>* residual, uint32_t bits,
                  uint32_t bucket, uint64_t seed, uint64_t step = 7) {
  const uint64_t n = grad.size();
  Quantized q;
  q.scales.assign(4 * BucketCount(n, bucket) + 1, 0xee);
  q.packed.assign(PackedBytes(n, bits) + 1, 0xee);  // sentinel byte after the end
  if (residual) q.residual = *residual;
  QsgdCompress(grad.data(), residual ? q.residual.data() : nullptr, n, bits, bucket, seed, step,
               q.scales.data(), q.packed.data(), nullptr);
  EXPECT_EQ(q.packed.back(), 0xee);
  EXPECT_EQ(q.scales.back(), 0xee);
  q.decoded.assign(n, 0.0f);
  QsgdDecodeAccumulate(q.scales.data(), q.packed.data(), n, bits, bucket, q.decoded.data());
  return q;
}

TEST(QsgdTest, ErrorBoundedByOneLevelAndResidualExact) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    for (uint32_t bucket : {1u, 7u, 512u}) {
      const uint64_t n = 3000 + rng() % 100;  // not a multiple of the bucket
      const std::vector<float> grad = Normal(n, 1.0f, rng);
      const std::vector<float> residual = Normal(n, 0.3f, rng);
      const Quantized q = RunQsgd(grad, &residual, bits, bucket, rng());
      const uint32_t m = QsgdMaxCode(bits);
      for (uint64_t i = 0; i < n; ++i) {
        const float acc = grad[i] + residual[i];
        const uint64_t b = i / bucket;
        float scale = 0;
        for (uint64_t j = b * bucket; j < std::min<uint64_t>(n, (b + 1) * bucket); ++j) {
          scale = std::max(scale, std::fabs(grad[j] + residual[j]));
        }
        ASSERT_EQ(LoadValue(q.scales.data(), b, ValueFormat::kFp32), scale);
        ASSERT_LE(std::fabs(q.decoded[i] - acc), 2 * scale / m * 1.0001f)
            << "bits " << bits << " i " << i;
        ASSERT_EQ(FloatBits(q.residual[i]), FloatBits(ResidualAfter(acc, q.decoded[i])));
      }
    }
  }
}

TEST(QsgdTest, UnbiasedInExpectationOverSeeds) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 600;
  const uint32_t bucket = 64;
  const std::vector<float> grad = Normal(n, 1.0f, rng);
  for (uint32_t bits : {1u, 2u, 4u, 8u}) {
    const int kTrials = 2000;
    std::vector<double> mean(n, 0.0);
    std::vector<float> scales(BucketCount(n, bucket));
    for (int t = 0; t < kTrials; ++t) {
      const Quantized q = RunQsgd(grad, nullptr, bits, bucket, rng());
      for (uint64_t i = 0; i < n; ++i) mean[i] += q.decoded[i] / kTrials;
      if (t == 0) {
        for (size_t b = 0; b < scales.size(); ++b) {
          scales[b] = LoadValue(q.scales.data(), b, ValueFormat::kFp32);
        }
      }
    }
    const uint32_t m = QsgdMaxCode(bits);
    for (uint64_t i = 0; i < n; ++i) {
      // sd of one draw <= scale/m; 5 standard errors of the mean.
      const double tol = 5.0 * scales[i / bucket] / m / std::sqrt(double{kTrials}) + 1e-6;
      ASSERT_NEAR(mean[i], grad[i], tol) << "bits " << bits << " i " << i;
    }
  }
}

// What training does: one seed, step after step. Each element's mean over
// the steps is its value, and the rounding errors of different elements
// are uncorrelated: a bucket's summed error has the variance of the sum of
// its elements' (a hash that rounds neighbours alike inflates it).
TEST(QsgdTest, UnbiasedAndUncorrelatedOverStepsOfOneSeed) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 512, seed = rng();
  const uint32_t bucket = 64;
  const std::vector<float> grad = Normal(n, 1.0f, rng);
  for (uint32_t bits : {2u, 4u, 8u}) {
    SCOPED_TRACE(::testing::Message() << "bits " << bits);
    const int kSteps = 3000;
    const uint64_t buckets = BucketCount(n, bucket);
    std::vector<double> mean(n, 0.0), var(n, 0.0), bucket_sum(buckets, 0.0),
        bucket_sum2(buckets, 0.0);
    std::vector<float> scales(buckets);
    for (int s = 0; s < kSteps; ++s) {
      const Quantized q = RunQsgd(grad, nullptr, bits, bucket, seed, s);
      std::vector<double> err(buckets, 0.0);
      for (uint64_t i = 0; i < n; ++i) {
        const double e = static_cast<double>(q.decoded[i]) - grad[i];
        mean[i] += e / kSteps;
        var[i] += e * e / kSteps;
        err[i / bucket] += e;
      }
      for (uint64_t b = 0; b < buckets; ++b) {
        bucket_sum[b] += err[b] / kSteps;
        bucket_sum2[b] += err[b] * err[b] / kSteps;
        if (s == 0) scales[b] = LoadValue(q.scales.data(), b, ValueFormat::kFp32);
      }
    }
    const uint32_t m = QsgdMaxCode(bits);
    for (uint64_t i = 0; i < n; ++i) {
      const double tol = 5.0 * scales[i / bucket] / m / std::sqrt(double{kSteps}) + 1e-6;
      ASSERT_NEAR(mean[i], 0.0, tol) << "i " << i;
    }
    for (uint64_t b = 0; b < buckets; ++b) {
      double independent = 0;  // the sum of the elements' error variances
      for (uint64_t i = b * bucket; i < (b + 1) * bucket; ++i) independent += var[i];
      const double got = bucket_sum2[b] - bucket_sum[b] * bucket_sum[b];
      // 3000 steps estimate a variance within ~3 % (sd); allow 20 %.
      EXPECT_NEAR(got, independent, 0.2 * independent) << "bucket " << b;
    }
  }
}

TEST(QsgdTest, ZeroBucketGivesZerosAndNonFiniteIsContained) {
  std::vector<float> grad(10, 0.0f);
  grad[7] = std::nanf("");
  grad[8] = std::numeric_limits<float>::infinity();
  grad[9] = 2.0f;
  std::vector<float> residual(10, 0.0f);
  const Quantized q = RunQsgd(grad, &residual, 4, 5, 1);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(q.decoded[i], 0.0f) << i;
    EXPECT_EQ(q.residual[i], 0.0f);
  }
  for (int i = 5; i < 10; ++i) EXPECT_TRUE(std::isfinite(q.decoded[i])) << i;
  for (float r : q.residual) EXPECT_TRUE(std::isfinite(r));
  // The bucket maximum decodes to the top level: a float or so below it
  // (the step s / M is rounded toward zero), so its residual is tiny.
  EXPECT_LE(q.decoded[9], 2.0f);
  EXPECT_GE(q.decoded[9], std::nextafter(2.0f, 0.0f));
}

TEST(QsgdLevelsTest, DecodedTableMatchesDequantize) {
  // qsgd_levels.h's table of a bucket's decoded values (bits <= 4), for
  // every code, against element_math.h's. (Scalar code called from here:
  // the same in every build of the kernels, so tested once.)
  for (uint32_t bits = 1; bits <= 4; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    for (float scale : {1.0f, 0.3f, 3e-39f, 3e38f, std::numeric_limits<float>::max(), 0.0f}) {
      float table[16];
      QsgdDecodedTable(bits, scale, table);
      for (uint32_t q = 0; q < 16; ++q) {
        EXPECT_EQ(FloatBits(QsgdDequantize(q & m, scale, m)), FloatBits(table[q]))
            << "bits " << bits << " code " << q << " scale " << scale;
      }
    }
  }
}

#if GRADWIRE_CPU_V3_FUNCTIONS
GRADWIRE_CPU_V3 void LevelStepsV3(const float* scales, float max_code, float* steps) {
  _mm256_storeu_ps(steps, QsgdLevelStepsV3(_mm256_loadu_ps(scales), _mm256_set1_ps(max_code)));
}
#endif
#if GRADWIRE_CPU_V4_FUNCTIONS
GRADWIRE_CPU_V4 void LevelStepsV4(const float* scales, float max_code, float* steps) {
  _mm512_storeu_ps(steps, QsgdLevelStepsV4(_mm512_loadu_ps(scales), _mm512_set1_ps(max_code)));
}
#endif

TEST(QsgdLevelsTest, VectorStepsMatchLevelStep) {
  // The decode-averages' vector steps (a fused multiply-subtract's sign for
  // element_math.h's test in double), on the edges and on random finite
  // scales, for every width.
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<float> scales = {0.0f,
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::max(),
                               1e-40f,
                               1.0f,
                               3.0f,
                               0.1f};
  while (scales.size() < 16 * 256) {
    scales.push_back(BitsFloat(static_cast<uint32_t>(rng()) % 0x7f800000u));
  }
  bool ran = false;
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    const uint32_t m = QsgdMaxCode(bits);
    for (size_t at = 0; at < scales.size(); at += 16) {
      float want[16], got[16];
      for (int i = 0; i < 16; ++i) want[i] = QsgdLevelStep(scales[at + i], m);
#if GRADWIRE_CPU_V3_FUNCTIONS
      if (CpuIsX86V3()) {
        LevelStepsV3(&scales[at], static_cast<float>(m), got);
        LevelStepsV3(&scales[at + 8], static_cast<float>(m), got + 8);
        for (int i = 0; i < 16; ++i) {
          ASSERT_EQ(FloatBits(want[i]), FloatBits(got[i])) << scales[at + i] << " bits " << bits;
        }
        ran = true;
      }
#endif
#if GRADWIRE_CPU_V4_FUNCTIONS
      if (CpuIsX86V4()) {
        LevelStepsV4(&scales[at], static_cast<float>(m), got);
        for (int i = 0; i < 16; ++i) {
          ASSERT_EQ(FloatBits(want[i]), FloatBits(got[i])) << scales[at + i] << " bits " << bits;
        }
      }
#endif
    }
  }
  if (!ran) GTEST_SKIP() << "no x86-64-v3 vector steps in this build or on this CPU";
}

TEST(SignTest, MeanMagnitudeScaleAndExactResidual) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bucket : {128u, 13u}) {
    const uint64_t n = 1000 + rng() % 37;
    std::vector<float> grad = Normal(n, 1.0f, rng), residual = Normal(n, 0.5f, rng);
    grad[3] = 0.0f;
    residual[3] = 0.0f;
    std::vector<float> res = residual;
    std::vector<uint8_t> scales(4 * BucketCount(n, bucket)), packed(PackedBytes(n, 1));
    FusedStats stats;
    SignCompress(grad.data(), res.data(), n, bucket, scales.data(), packed.data(), &stats);
    std::vector<float> decoded(n, 0.0f);
    SignDecodeAccumulate(scales.data(), packed.data(), n, bucket, decoded.data());
    for (uint64_t b = 0; b < BucketCount(n, bucket); ++b) {
      double sum = 0;
      const uint64_t end = std::min<uint64_t>(n, (b + 1) * bucket);
      for (uint64_t i = b * bucket; i < end; ++i) sum += std::fabs(grad[i] + residual[i]);
      const float scale = static_cast<float>(sum / (end - b * bucket));
      ASSERT_EQ(LoadValue(scales.data(), b, ValueFormat::kFp32), scale);
      for (uint64_t i = b * bucket; i < end; ++i) {
        const float acc = grad[i] + residual[i];
        ASSERT_EQ(decoded[i], acc < 0 ? -scale : scale) << i;
        ASSERT_EQ(FloatBits(res[i]), FloatBits(ResidualAfter(acc, decoded[i])));
      }
    }
    EXPECT_GT(decoded[3], 0.0f);  // sign(0) = +1
    EXPECT_EQ(stats.selected, n);
  }
}

TEST(CastTest, RoundTripAndResidualForEachFormat) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 4099;
  std::vector<float> grad = Normal(n, 100.0f, rng), residual = Normal(n, 1.0f, rng);
  grad[0] = 1e6f;  // beyond fp16: saturates, the excess stays in the residual
  residual[0] = 0.0f;
  for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
    std::vector<float> res = residual;
    std::vector<uint8_t> values(n * ValueWidth(f));
    CastCompress(grad.data(), res.data(), n, f, values.data(), nullptr);
    std::vector<float> decoded(n, 1.0f);
    CastDecodeAccumulate(values.data(), n, f, decoded.data());
    for (uint64_t i = 0; i < n; ++i) {
      const float acc = grad[i] + residual[i];
      const float dec = RoundToFormat(acc, f);
      ASSERT_EQ(decoded[i], 1.0f + dec);
      ASSERT_EQ(FloatBits(res[i]), FloatBits(acc - dec));
      ASSERT_EQ(dec + res[i], acc) << i;  // exact: Sterbenz, the cast is within 2x
    }
    if (f == ValueFormat::kFp16) {
      EXPECT_EQ(res[0], 1e6f - 65504.0f);
    }
  }
}

TEST(SparseTest, ScatterAddsAtIndices) {
  std::vector<uint8_t> values(3 * 4);
  const float v[3] = {1.5f, -2.0f, 4.0f};
  for (int j = 0; j < 3; ++j) StoreValue(values.data(), j, v[j], ValueFormat::kFp32);
  const uint32_t idx[3] = {0, 4, 9};
  std::vector<float> dense(10, 1.0f);
  SparseDecodeAccumulate(idx, values.data(), 3, ValueFormat::kFp32, dense.data());
  EXPECT_EQ(dense[0], 2.5f);
  EXPECT_EQ(dense[4], -1.0f);
  EXPECT_EQ(dense[9], 5.0f);
  EXPECT_EQ(dense[1], 1.0f);
}

// Lists long enough for the prefetching loop (entries a line or more apart
// on average) and for the plain one (closer), in each value format: every
// entry added once at its index, nothing else touched.
TEST(SparseTest, ScatterAddsEveryEntryAtAnySpacing) {
  for (const uint32_t gap : {1u, 3u, 16u, 17u, 100u}) {
    for (const ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
      const uint64_t k = 1000;
      std::vector<uint32_t> idx(k);
      std::vector<uint8_t> values(k * 4);
      for (uint64_t j = 0; j < k; ++j) {
        idx[j] = static_cast<uint32_t>(5 + j * gap);
        StoreValue(values.data(), j, static_cast<float>(j % 64) + 1.0f, f);
      }
      std::vector<float> dense(5 + k * gap + 7, 0.5f);
      SparseDecodeAccumulate(idx.data(), values.data(), k, f, dense.data());
      std::vector<float> want(dense.size(), 0.5f);
      for (uint64_t j = 0; j < k; ++j) want[idx[j]] += static_cast<float>(j % 64) + 1.0f;
      for (size_t i = 0; i < dense.size(); ++i) {
        ASSERT_EQ(dense[i], want[i])
            << "gap " << gap << " format " << static_cast<int>(f) << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
