// CPU reference for summing workers' quantized payloads: the sum of decodes
// in worker order, averaged; bad formats refused with dense untouched.
#include "gradwire/kernels/cpu/quantized_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/element_math.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

TEST(QuantizedSumTest, AveragesWorkersWithinTheQuantizationBound) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 5000;
  const uint32_t bits = 6, bucket = 256;
  const int P = 4;
  std::normal_distribution<float> d;
  std::vector<std::vector<uint8_t>> scales(P, std::vector<uint8_t>(4 * BucketCount(n, bucket)));
  std::vector<std::vector<uint8_t>> packed(P, std::vector<uint8_t>(PackedBytes(n, bits)));
  std::vector<double> mean(n, 0.0);
  std::vector<QuantizedPayload> payloads;
  float max_abs = 0;
  for (int w = 0; w < P; ++w) {
    std::vector<float> g(n);
    for (uint64_t i = 0; i < n; ++i) {
      g[i] = d(rng);
      mean[i] += g[i] / P;
      max_abs = std::max(max_abs, std::fabs(g[i]));
    }
    cpu::QsgdCompress(g.data(), nullptr, n, bits, bucket, rng(), 1, scales[w].data(),
                      packed[w].data(), nullptr);
    payloads.push_back({scales[w].data(), packed[w].data()});
  }
  std::vector<float> dense(n, 123.0f);
  ASSERT_TRUE(cpu::QuantizedSumToDense(payloads, {false, bits, bucket}, absl::MakeSpan(dense),
                                       {false, 1.0f / P})
                  .ok());
  const double bound = 2.0 * max_abs / QsgdMaxCode(bits);  // per worker, so also for the mean
  for (uint64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(dense[i] - mean[i]), bound + 1e-5) << i;
}

TEST(QuantizedSumTest, RefusesBadFormats) {
  std::vector<float> dense(8, 1.0f);
  std::vector<uint8_t> s(4), p(8);
  std::vector<QuantizedPayload> one = {{s.data(), p.data()}};
  EXPECT_EQ(cpu::QuantizedSumToDense(one, {false, 9, 8}, absl::MakeSpan(dense), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::QuantizedSumToDense(one, {true, 2, 8}, absl::MakeSpan(dense), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::QuantizedSumToDense(one, {false, 4, 0}, absl::MakeSpan(dense), {}).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<QuantizedPayload> null_one = {{nullptr, p.data()}};
  EXPECT_EQ(cpu::QuantizedSumToDense(null_one, {false, 4, 8}, absl::MakeSpan(dense), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dense, std::vector<float>(8, 1.0f));
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
