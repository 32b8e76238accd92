// The CUDA fused multi-tensor SGD step gives the CPU reference's bits, on
// many tensors of awkward sizes (empty, 1, not multiples of 4 or of a chunk)
// and on misaligned tensors (the scalar path); with enough chunks that every
// block loops over several; on a non-blocking stream. Seeds are printed.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gradwire/kernels/cpu/fused_sgd.h"
#include "gradwire/kernels/cuda/fused_sgd.h"
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;
using testing::SameBits;

void RunCase(std::vector<size_t> sizes, size_t misalign, SgdOptions o, bool with_momentum,
             testing::TestStream* stream = nullptr) {
  if (testing::QuickMode()) sizes.resize(6);
  GRADWIRE_GPU_SEEDED_RNG(rng);
  std::normal_distribution<float> dist;
  size_t total = 0;
  std::vector<size_t> offset;
  for (size_t n : sizes) {
    offset.push_back(total + misalign);
    total += n + misalign + 3;
  }
  std::vector<float> p(total), g(total), m(total);
  for (size_t i = 0; i < total; ++i) {
    p[i] = dist(rng);
    g[i] = dist(rng) * 10.0f;
    m[i] = dist(rng);
  }
  DeviceArray<float> dp(p), dg(g), dm(m);
  ASSERT_EQ(dp.error() + dg.error() + dm.error(), "");
  std::vector<SgdTensor> host, dev;
  for (size_t t = 0; t < sizes.size(); ++t) {
    host.push_back({p.data() + offset[t], g.data() + offset[t],
                    with_momentum ? m.data() + offset[t] : nullptr, sizes[t]});
    dev.push_back({dp.get() + offset[t], dg.get() + offset[t],
                   with_momentum ? dm.get() + offset[t] : nullptr, sizes[t]});
  }
  size_t bytes = 0;
  cuda::FusedSgdPlan plan;
  cuda::Stream s = stream != nullptr ? stream->get() : nullptr;
  ASSERT_TRUE(cuda::PrepareFusedSgd(nullptr, &bytes, dev, o, &plan, s).ok());
  DeviceArray<uint8_t> storage(bytes);
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ASSERT_TRUE(cuda::PrepareFusedSgd(storage.get(), &bytes, dev, o, &plan, s).ok());
  for (int step = 0; step < 3; ++step) {
    o.first_step = step == 0;
    ASSERT_TRUE(cpu::FusedSgdStep(host, o).ok());
    ASSERT_TRUE(cuda::FusedSgdStep(plan, o, s).ok());
    ASSERT_EQ(stream != nullptr ? stream->Synchronize() : testing::DeviceSynchronize(), "");
  }
  std::vector<float> gp = dp.Download(), gm = dm.Download();
  for (size_t i = 0; i < total; ++i) {
    ASSERT_TRUE(SameBits(gp[i], p[i])) << "param " << i << ": " << gp[i] << " vs " << p[i];
    ASSERT_TRUE(SameBits(gm[i], m[i])) << "momentum " << i << ": " << gm[i] << " vs " << m[i];
  }
}

const std::vector<size_t> kSizes = {0, 1, 3, 4, 1000, 16384, 16385, 100003, 0, 7, 1 << 20};

TEST(GpuFusedSgdTest, MomentumNesterovWeightDecayBitIdentical) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SgdOptions o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 5e-4f;
  o.nesterov = true;
  RunCase(kSizes, 0, o, true);
}

TEST(GpuFusedSgdTest, DampenedMomentumOnMisalignedTensors) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.5f;
  o.dampening = 0.1f;
  RunCase(kSizes, 1, o, true);
}

TEST(GpuFusedSgdTest, PlainSgdWithoutMomentumBuffers) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SgdOptions o;
  o.lr = 0.3f;
  o.weight_decay = 0.01f;
  RunCase(kSizes, 2, o, false);
}

// More chunks (16384 elements each) than 4 x the grid (8 blocks per SM):
// every block loops over several chunks of several tensors.
TEST(GpuFusedSgdTest, SeveralChunksPerBlockOnANonBlockingStream) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  if (testing::QuickMode()) GTEST_SKIP() << "large";
  GRADWIRE_GPU_SMS(sms);
  const size_t chunks = 4 * 8 * sms;
  std::vector<size_t> sizes = {chunks / 2 * 16384 + 5, 3, chunks / 2 * 16384 - 1, 16385};
  testing::TestStream stream;
  ASSERT_EQ(stream.error(), "");
  SgdOptions o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 1e-4f;
  RunCase(sizes, 0, o, true, &stream);
}

TEST(GpuFusedSgdTest, RejectsMomentumWithoutBuffers) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  DeviceArray<float> p(8), g(8);
  std::vector<SgdTensor> dev = {{p.get(), g.get(), nullptr, 8}};
  SgdOptions o;
  size_t bytes = 0;
  cuda::FusedSgdPlan plan;
  ASSERT_TRUE(cuda::PrepareFusedSgd(nullptr, &bytes, dev, o, &plan, nullptr).ok());
  DeviceArray<uint8_t> storage(bytes);
  ASSERT_TRUE(cuda::PrepareFusedSgd(storage.get(), &bytes, dev, o, &plan, nullptr).ok());
  o.momentum = 0.9f;
  EXPECT_EQ(cuda::FusedSgdStep(plan, o, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
