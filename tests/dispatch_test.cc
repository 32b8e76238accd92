// Dispatch routes by where buffers live: host buffers get the CPU
// reference's exact results; device buffers get the CUDA kernel's (same
// bits); buffers split between host and device are refused.
#include "gradwire/kernels/dispatch.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/topk.h"
#include "tests/gpu_test_util.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

std::vector<float> Normal(uint64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(DispatchTest, HostBuffersRunTheCpuReference) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 10000, k = 100;
  const std::vector<float> grad = Normal(n, rng);
  std::vector<float> res_a = Normal(n, rng), res_b = res_a;
  EXPECT_EQ(Locate(grad.data()), Location::kHost);
  uint64_t bytes = 0;
  ASSERT_TRUE(TopKCompress(nullptr, &bytes, grad.data(), res_a.data(), n, k, ValueFormat::kFp16, nullptr, nullptr,
                           nullptr).ok());
  std::vector<uint64_t> temp(bytes / 8 + 1);
  std::vector<uint32_t> idx_a(k), idx_b(k);
  std::vector<uint8_t> val_a(2 * k), val_b(2 * k);
  FusedStats st_a, st_b;
  ASSERT_TRUE(TopKCompress(temp.data(), &bytes, grad.data(), res_a.data(), n, k, ValueFormat::kFp16, idx_a.data(),
                           val_a.data(), &st_a).ok());
  cpu::TopKCompress(temp.data(), &bytes, grad.data(), res_b.data(), n, k, ValueFormat::kFp16, idx_b.data(),
                    val_b.data(), &st_b);
  EXPECT_EQ(idx_a, idx_b);
  EXPECT_EQ(val_a, val_b);
  EXPECT_EQ(res_a, res_b);
  EXPECT_EQ(st_a.selected, k);

  std::vector<uint8_t> scales(4 * BucketCount(n, 512)), packed(PackedBytes(n, 4));
  ASSERT_TRUE(QsgdCompress(grad.data(), nullptr, n, 4, 512, 1, 2, scales.data(), packed.data(), nullptr).ok());
  std::vector<float> dense(n, 0.0f);
  ASSERT_TRUE(QsgdDecodeAccumulate(scales.data(), packed.data(), n, 4, 512, dense.data()).ok());
  for (uint64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(dense[i] - grad[i]), 2.0f * 5.0f / 15.0f + 1e-6f);
}

TEST(DispatchTest, HostPathStillValidates) {
  std::vector<float> g(4);
  uint64_t bytes = 0;
  EXPECT_EQ(TopKCompress(nullptr, &bytes, g.data(), nullptr, 4, 5, ValueFormat::kFp32, nullptr, nullptr, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> out(16);
  EXPECT_EQ(QsgdCompress(g.data(), nullptr, 4, 0, 4, 0, 0, out.data(), out.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DispatchTest, DeviceBuffersRunCudaAndMixedAreRefused) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 1 << 16;
  const std::vector<float> grad = Normal(n, rng);
  testing::DeviceArray<float> d_grad(grad);
  EXPECT_EQ(Locate(d_grad.get()), Location::kDevice);
  std::vector<uint8_t> host_out(n);
  testing::DeviceArray<uint8_t> d_out(2 * n);
  EXPECT_EQ(CastCompress(d_grad.get(), nullptr, n, ValueFormat::kFp16, host_out.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(CastCompress(d_grad.get(), nullptr, n, ValueFormat::kFp16, d_out.get(), nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const std::vector<uint8_t> got = d_out.Download();
  std::vector<uint8_t> want(2 * n);
  ASSERT_TRUE(CastCompress(grad.data(), nullptr, n, ValueFormat::kFp16, want.data(), nullptr).ok());
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
