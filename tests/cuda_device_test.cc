// The nvcc-built probe kernel runs and computes the right values on a GPU,
// and CudaDevice's CheckDeviceRange ends a buffer where its cudaMalloc
// did; without a GPU each test says SKIPPED (never a silent pass).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/device.h"
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

TEST(CudaDeviceTest, DeviceRangesEndWithTheirAllocation) {
  std::string why;
  if (kernels::cuda::DeviceCount(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  kernels::Device& device = kernels::CudaDevice();
  absl::StatusOr<void*> p = device.Allocate(4096);
  ASSERT_TRUE(p.ok()) << p.status();
  const char* d = static_cast<const char*>(*p);
  EXPECT_TRUE(device.CheckDeviceRange(d, 4096).ok());
  EXPECT_TRUE(device.CheckDeviceRange(d + 100, 3996).ok());
  // cudaMalloc rounds up its allocations; a range far past this one's end
  // (1 GiB) runs off it, or into memory the driver does not call device.
  EXPECT_EQ(device.CheckDeviceRange(d, size_t{1} << 30).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> host(16);
  EXPECT_EQ(device.CheckDeviceRange(host.data(), 64).code(), absl::StatusCode::kInvalidArgument);
  device.Free(*p);
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
