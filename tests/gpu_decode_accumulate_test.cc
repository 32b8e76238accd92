// The CUDA sum of P workers' sparse payloads gives the CPU reference's bits
// (fixed worker order), for every value type, with and without averaging,
// for more workers than one launch takes, and over poisoned outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/quantized_sum.h"
#include "gradwire/kernels/cpu/sparse_sum.h"
#include "gradwire/kernels/cuda/quantized_sum.h"
#include "gradwire/kernels/cuda/sparse_sum.h"
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;
using testing::SameBits;

uint16_t ToBf16Bits(float f) {  // truncation is fine: any bits are valid input
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

struct Worker {
  std::vector<uint32_t> idx;
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  std::unique_ptr<DeviceArray<uint32_t>> d_idx;
  std::unique_ptr<DeviceArray<float>> d_f32;
  std::unique_ptr<DeviceArray<uint16_t>> d_u16;
};

void RunCase(uint64_t n, int workers, double density, ValueFormat type, bool accumulate) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " P=" << workers << " density=" << density
                                    << " type=" << int(type) << " accumulate=" << accumulate);
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> dist;
  std::vector<Worker> w(workers);
  std::vector<SparsePayload> host, dev;
  for (Worker& x : w) {
    for (uint64_t i = 0; i < n; ++i) {
      if (std::uniform_real_distribution<double>()(rng) < density) x.idx.push_back(static_cast<uint32_t>(i));
    }
    for (size_t j = 0; j < x.idx.size(); ++j) {
      float v = dist(rng) * std::exp(dist(rng));  // heavy-ish tails
      x.f32.push_back(v);
      x.u16.push_back(type == ValueFormat::kBf16 ? ToBf16Bits(v)
                                                     : static_cast<uint16_t>(rng() & 0x7BFF));
    }
    x.d_idx = std::make_unique<DeviceArray<uint32_t>>(x.idx);
    x.d_f32 = std::make_unique<DeviceArray<float>>(x.f32);
    x.d_u16 = std::make_unique<DeviceArray<uint16_t>>(x.u16);
    const bool f32 = type == ValueFormat::kFp32;
    host.push_back({x.idx.data(),
                    f32 ? reinterpret_cast<const uint8_t*>(x.f32.data())
                        : reinterpret_cast<const uint8_t*>(x.u16.data()),
                    x.idx.size(), type});
    dev.push_back({x.d_idx->get(),
                   f32 ? reinterpret_cast<const uint8_t*>(x.d_f32->get())
                       : reinterpret_cast<const uint8_t*>(x.d_u16->get()),
                   x.idx.size(), type});
  }
  std::vector<float> dense(n);
  for (float& x : dense) x = dist(rng);
  DeviceArray<float> d_dense(n);
  if (accumulate) {
    ASSERT_EQ(d_dense.Upload(dense), "");
  } else {
    ASSERT_EQ(d_dense.Poison(), "");
  }
  const SparseSumOptions options{accumulate, workers > 0 ? 1.0f / workers : 1.0f};
  ASSERT_TRUE(cpu::SparseSumToDense(host, absl::MakeSpan(dense), options).ok());
  ASSERT_TRUE(cuda::SparseSumToDense(dev, d_dense.get(), n, options, nullptr, nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  std::vector<float> got = d_dense.Download();
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameBits(got[i], dense[i])) << "at " << i << ": " << got[i] << " vs " << dense[i];
  }
}

TEST(GpuDecodeAccumulateTest, Fp32BitIdenticalAcrossSizesAndDensities) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  for (uint64_t n : {1ull, 4095ull, 4096ull, 4097ull, 100003ull, 1ull << 22}) {
    if (testing::QuickMode() && n > 4097) continue;
    for (double density : {0.001, 0.01, 0.1, 1.0}) {
      RunCase(n, 8, density, ValueFormat::kFp32, false);
    }
  }
}

TEST(GpuDecodeAccumulateTest, SixteenBitValuesAndAccumulate) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  const uint64_t n = testing::QuickMode() ? 10000 : 1 << 20;
  RunCase(n, 4, 0.01, ValueFormat::kFp16, true);
  RunCase(n, 4, 0.05, ValueFormat::kBf16, false);
  RunCase(123457, 3, 0.5, ValueFormat::kBf16, true);
}

TEST(GpuDecodeAccumulateTest, MoreWorkersThanOneLaunchAndNone) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  RunCase(50000, 70, 0.02, ValueFormat::kFp32, false);
  RunCase(50000, 129, 0.01, ValueFormat::kFp32, true);
  RunCase(50000, 0, 0.0, ValueFormat::kFp32, false);
}

TEST(GpuDecodeAccumulateTest, EmptyDenseIsANoOp) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(cuda::SparseSumToDense({}, nullptr, 0, {}, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire

namespace gradwire {
namespace kernels {
namespace {

// Quantized payloads (QSGD of every width, sign), made by the CPU
// compressors, summed by both sides in worker order.
void RunQuantizedCase(uint64_t n, int workers, bool sign, uint32_t bits, uint32_t bucket, bool accumulate) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " P=" << workers << " sign=" << sign << " bits=" << bits
                                    << " bucket=" << bucket << " accumulate=" << accumulate);
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> dist;
  std::vector<std::vector<uint8_t>> scales(workers), packed(workers);
  std::vector<std::unique_ptr<DeviceArray<uint8_t>>> d_scales, d_packed;
  std::vector<QuantizedPayload> host, dev;
  for (int w = 0; w < workers; ++w) {
    std::vector<float> g(n);
    for (float& x : g) x = dist(rng) * std::exp(dist(rng));
    scales[w].resize(4 * BucketCount(n, bucket));
    packed[w].resize(PackedBytes(n, bits));
    if (sign) {
      cpu::SignCompress(g.data(), nullptr, n, bucket, scales[w].data(), packed[w].data(), nullptr);
    } else {
      cpu::QsgdCompress(g.data(), nullptr, n, bits, bucket, rng(), 3, scales[w].data(), packed[w].data(), nullptr);
    }
    d_scales.push_back(std::make_unique<DeviceArray<uint8_t>>(scales[w]));
    d_packed.push_back(std::make_unique<DeviceArray<uint8_t>>(packed[w]));
    host.push_back({scales[w].data(), packed[w].data()});
    dev.push_back({d_scales.back()->get(), d_packed.back()->get()});
  }
  std::vector<float> dense(n);
  for (float& x : dense) x = dist(rng);
  DeviceArray<float> d_dense(n);
  ASSERT_EQ(accumulate ? d_dense.Upload(dense) : d_dense.Poison(), "");
  const QuantizedFormat format{sign, sign ? 1u : bits, bucket};
  const SparseSumOptions options{accumulate, 1.0f / std::max(workers, 1)};
  ASSERT_TRUE(cpu::QuantizedSumToDense(host, format, absl::MakeSpan(dense), options).ok());
  ASSERT_TRUE(cuda::QuantizedSumToDense(dev, format, d_dense.get(), n, options, nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const std::vector<float> got = d_dense.Download();
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameBits(got[i], dense[i])) << "at " << i << ": " << got[i] << " vs " << dense[i];
  }
}

TEST(GpuDecodeAccumulateTest, QuantizedPayloadsBitIdentical) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  const uint64_t n = testing::QuickMode() ? 3001 : 1000003;
  for (uint32_t bits = 1; bits <= 8; ++bits) RunQuantizedCase(n, 8, false, bits, 512, bits % 2 == 0);
  RunQuantizedCase(n, 8, true, 1, 512, false);
  RunQuantizedCase(n, 3, false, 3, 7, true);
  RunQuantizedCase(5000, 70, false, 4, 100, false);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
