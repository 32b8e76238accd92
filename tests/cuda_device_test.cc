// The nvcc-built probe kernel runs and computes the right values on a GPU;
// without one the test says SKIPPED (never a silent pass).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "gradwire/kernels/cuda/device.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace {

TEST(CudaDeviceTest, ProbeKernelComputesAffineMap) {
  std::string why;
  if (kernels::cuda::DeviceCount(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  GRADWIRE_SEEDED_RNG(rng);
  std::printf("seed %llu\n", static_cast<unsigned long long>(rng_seed));
  std::normal_distribution<float> dist;
  std::vector<float> in(1 << 20), out(in.size(), std::nanf(""));
  for (float& x : in) x = dist(rng);
  ASSERT_EQ(kernels::cuda::ProbeAffineKernel(in.data(), out.data(), in.size()), "");
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], in[i] * 2.0f + 1.0f) << "at " << i;
}

TEST(CudaDeviceTest, NoDeviceIsReportedWithAReason) {
  std::string why;
  if (kernels::cuda::DeviceCount(&why) == 0) {
    EXPECT_FALSE(why.empty());
  } else {
    EXPECT_TRUE(kernels::cuda::BuiltWithCuda());
  }
}

}  // namespace
}  // namespace gradwire
