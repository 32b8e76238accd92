// The CUDA sums of P workers' payloads (kernels/cuda/sparse_sum.h,
// kernels/cuda/quantized_sum.h) give the CPU references' bits (fixed worker
// order; NaN payloads aside), for every value type including fp16/bf16
// specials (negative, subnormal, ±Inf, NaN), with and without averaging and
// accumulation, for more workers than one launch takes, over poisoned
// outputs; at sizes that give every block several tiles; on a non-blocking
// stream and from a replayed CUDA graph; and, for broken indices
// (out of range, unsorted, repeated), the device-side check: the exact
// count of broken entries and no write outside dense (memcheck shows it).
// Seeds are printed. Without a GPU every test prints SKIPPED.
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
#include "tests/gpu_test_data.h"
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;

// A 16-bit value with every class represented: random bit patterns (any
// sign, subnormals, normals), and often ±0, ±Inf, NaN, ±max.
uint16_t Random16(std::mt19937_64& rng, ValueFormat type) {
  const uint16_t inf = type == ValueFormat::kFp16 ? 0x7c00 : 0x7f80;
  const uint16_t max = type == ValueFormat::kFp16 ? 0x7bff : 0x7f7f;
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  switch (rng() % 16) {
    case 0:
      return sign;  // ±0
    case 1:
      return sign | inf;  // ±Inf
    case 2:
      return sign | (inf + 1 + rng() % 64);  // NaN (payloads)
    case 3:
      return sign | max;  // largest finite
    case 4:
      return sign | (rng() % 0x3ff + 1);  // subnormal (fp16), tiny (bf16)
    default: {
      // Ordinary magnitudes: exponent near 1.0 so sums do not all saturate.
      const uint16_t bias = type == ValueFormat::kFp16 ? 0x3c00 : 0x3f80;
      const uint16_t spread = type == ValueFormat::kFp16 ? 0x1000 : 0x0400;
      return sign | static_cast<uint16_t>(bias - spread / 2 + rng() % spread);
    }
  }
}

struct Worker {
  std::vector<uint32_t> idx;
  std::vector<float> f32;
  std::vector<uint16_t> u16;
  std::unique_ptr<DeviceArray<uint32_t>> d_idx;
  std::unique_ptr<DeviceArray<float>> d_f32;
  std::unique_ptr<DeviceArray<uint16_t>> d_u16;
};

struct Payloads {
  std::vector<Worker> w;
  std::vector<SparsePayload> host, dev;
};

// Strictly increasing indices of density `density` in [0, n), values of
// `type`; uploaded.
void MakePayloads(uint64_t n, int workers, double density, ValueFormat type, std::mt19937_64& rng,
                  Payloads* p) {
  std::normal_distribution<float> dist;
  p->w.resize(workers);
  for (Worker& x : p->w) {
    for (uint64_t i = 0; i < n; ++i) {
      if (std::uniform_real_distribution<double>()(rng) < density) {
        x.idx.push_back(static_cast<uint32_t>(i));
      }
    }
    for (size_t j = 0; j < x.idx.size(); ++j) {
      x.f32.push_back(dist(rng) * std::exp(dist(rng)));  // heavy-ish tails
      x.u16.push_back(type == ValueFormat::kFp32 ? 0 : Random16(rng, type));
    }
  }
  for (Worker& x : p->w) {
    x.d_idx = std::make_unique<DeviceArray<uint32_t>>(x.idx);
    x.d_f32 = std::make_unique<DeviceArray<float>>(x.f32);
    x.d_u16 = std::make_unique<DeviceArray<uint16_t>>(x.u16);
    const bool f32 = type == ValueFormat::kFp32;
    p->host.push_back({x.idx.data(),
                       f32 ? reinterpret_cast<const uint8_t*>(x.f32.data())
                           : reinterpret_cast<const uint8_t*>(x.u16.data()),
                       x.idx.size(), type});
    p->dev.push_back({x.d_idx->get(),
                      f32 ? reinterpret_cast<const uint8_t*>(x.d_f32->get())
                          : reinterpret_cast<const uint8_t*>(x.d_u16->get()),
                      x.idx.size(), type});
  }
}

void RunCase(uint64_t n, int workers, double density, ValueFormat type, bool accumulate,
             std::mt19937_64& rng, testing::TestStream* stream = nullptr) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " P=" << workers << " density=" << density
                                    << " type=" << int(type) << " accumulate=" << accumulate);
  Payloads p;
  MakePayloads(n, workers, density, type, rng, &p);
  std::normal_distribution<float> dist;
  std::vector<float> dense(n);
  for (float& x : dense) x = dist(rng);
  DeviceArray<float> d_dense(n);
  DeviceArray<uint64_t> d_bad(1);
  ASSERT_EQ(testing::InOrder({(accumulate ? d_dense.Upload(dense) : d_dense.Poison()),
                              d_bad.Poison(), testing::DeviceSynchronize()}),
            "");
  const SparseSumOptions options{accumulate, workers > 0 ? 1.0f / workers : 1.0f};
  ASSERT_TRUE(cpu::SparseSumToDense(p.host, absl::MakeSpan(dense), options).ok());
  const absl::Status s = cuda::SparseSumToDense(p.dev, d_dense.get(), n, options, d_bad.get(),
                                                stream != nullptr ? stream->get() : nullptr);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(stream != nullptr ? stream->Synchronize() : testing::DeviceSynchronize(), "");
  EXPECT_EQ(d_bad.Download()[0], 0u);  // valid payloads: nothing broken
  ExpectSameFloats(dense, d_dense.Download(), "sum");
}

TEST(GpuDecodeAccumulateTest, Fp32BitIdenticalAcrossSizesAndDensities) {
  GRADWIRE_GPU_TEST(rng);
  for (uint64_t n : {1ull, 4095ull, 4096ull, 4097ull, 100003ull, 1ull << 22}) {
    if (testing::QuickMode() && n > 4097) continue;
    for (double density : {0.001, 0.01, 0.1, 1.0}) {
      RunCase(n, 8, density, ValueFormat::kFp32, false, rng);
      if (HasFatalFailure()) return;
    }
  }
}

// Every block owns >= 4 tiles (the grid is at most 8 per SM), so the
// cursors carried from tile to tile, the rounds that end a worker's share
// of a tile and the end-of-tile barrier all run; densities from empty tiles
// to more than one round (256 entries) of a worker per tile.
TEST(GpuDecodeAccumulateTest, SeveralTilesPerBlock) {
  GRADWIRE_GPU_TEST(rng);
  GRADWIRE_GPU_SMS(sms);
  const uint64_t tiles_per_block = testing::QuickMode() ? 2 : 4;
  const uint64_t n = tiles_per_block * 8 * sms * 4096 + 4097;
  std::printf("n = %llu\n", static_cast<unsigned long long>(n));
  RunCase(n, 8, 0.01, ValueFormat::kFp32, false, rng);
  if (testing::QuickMode()) return;
  RunCase(n, 3, 0.2, ValueFormat::kFp16, true, rng);     // ~800 entries per tile: 4 rounds
  RunCase(n, 4, 0.0002, ValueFormat::kBf16, true, rng);  // most tiles without entries
}

TEST(GpuDecodeAccumulateTest, SixteenBitSpecialsAndAccumulate) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 10000 : 1 << 20;
  for (ValueFormat type : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    for (bool accumulate : {false, true}) {
      RunCase(n, 4, 0.01, type, accumulate, rng);
      RunCase(123457, 3, 0.5, type, accumulate, rng);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(GpuDecodeAccumulateTest, MoreWorkersThanOneLaunchAndNone) {
  GRADWIRE_GPU_TEST(rng);
  RunCase(50000, 70, 0.02, ValueFormat::kFp32, false, rng);
  RunCase(50000, 129, 0.01, ValueFormat::kFp16, true, rng);
  RunCase(50000, 0, 0.0, ValueFormat::kFp32, false, rng);
}

TEST(GpuDecodeAccumulateTest, EmptyDenseIsANoOp) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  DeviceArray<uint64_t> bad(1);
  ASSERT_EQ(bad.Poison(), "");
  EXPECT_TRUE(cuda::SparseSumToDense({}, nullptr, 0, {}, bad.get(), nullptr).ok());
  EXPECT_EQ(bad.Download()[0], 0u);
}

TEST(GpuDecodeAccumulateTest, NonBlockingStream) {
  GRADWIRE_GPU_TEST(rng);
  testing::TestStream stream;
  ASSERT_EQ(stream.error(), "");
  const uint64_t n = testing::QuickMode() ? 40000 : 3000017;
  RunCase(n, 8, 0.01, ValueFormat::kFp32, false, rng, &stream);
  RunCase(n, 70, 0.001, ValueFormat::kBf16, true, rng, &stream);
}

// One graph, replayed on new payload contents (same counts: the descriptors
// are baked into the launch), each replay against the CPU.
TEST(GpuDecodeAccumulateTest, GraphReplay) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 20000 : 1000003;
  Payloads p;
  MakePayloads(n, 5, 0.01, ValueFormat::kFp32, rng, &p);
  testing::TestStream stream;
  DeviceArray<float> d_dense(n);
  DeviceArray<uint64_t> d_bad(1);
  const SparseSumOptions options{true, 0.2f};
  std::vector<float> dense(n, 1.0f);
  ASSERT_EQ(testing::InOrder({stream.error(), d_dense.Upload(dense), testing::DeviceSynchronize()}),
            "");
  testing::TestGraph graph;
  ASSERT_EQ(graph.Begin(stream.get()), "");
  const absl::Status s =
      cuda::SparseSumToDense(p.dev, d_dense.get(), n, options, d_bad.get(), stream.get());
  ASSERT_EQ(graph.End(), "");
  ASSERT_TRUE(s.ok()) << s;
  std::normal_distribution<float> dist;
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(::testing::Message() << "replay " << replay);
    for (Worker& w : p.w) {
      for (float& v : w.f32) v = dist(rng);
      ASSERT_EQ(w.d_f32->Upload(w.f32), "");
    }
    ASSERT_EQ(testing::InOrder({d_bad.Poison(), testing::DeviceSynchronize()}), "");
    ASSERT_EQ(testing::InOrder({graph.Launch(), stream.Synchronize()}), "");
    ASSERT_TRUE(cpu::SparseSumToDense(p.host, absl::MakeSpan(dense), options).ok());
    EXPECT_EQ(d_bad.Download()[0], 0u);
    ExpectSameFloats(dense, d_dense.Download(), "sum");
    if (HasFatalFailure()) return;
  }
}

// Broken indices (the kernel cannot trust them: they live on the device):
// out of range (inside the last tile's slack and far beyond), not
// increasing, repeated. The count of broken entries is exact; nothing is
// written outside dense (the sanitizer's memcheck run checks that) and
// dense's guard zone beyond n keeps its poison.
TEST(GpuDecodeAccumulateTest, BrokenIndicesAreCountedAndStayInBounds) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = 3 * 4096 + 100;  // the last tile is 100 elements of 4096
  std::vector<std::vector<uint32_t>> idx = {
      {0, 5, 5, 7, 3, 9000, 4096 * 3 + 99},                           // repeat, decrease
      {1, 2, static_cast<uint32_t>(n), 4096 * 3 + 150, 0xFFFFFFFFu},  // >= n, way out
      {},                                                             // empty
  };
  // Count what the contract calls broken, on the host.
  uint64_t want_bad = 0;
  for (const auto& w : idx) {
    for (size_t j = 0; j < w.size(); ++j) {
      if (w[j] >= n || (j > 0 && w[j] <= w[j - 1])) ++want_bad;
    }
  }
  std::vector<std::unique_ptr<DeviceArray<uint32_t>>> d_idx;
  std::vector<std::unique_ptr<DeviceArray<float>>> d_val;
  std::vector<SparsePayload> dev;
  for (const auto& w : idx) {
    d_idx.push_back(std::make_unique<DeviceArray<uint32_t>>(w));
    d_val.push_back(std::make_unique<DeviceArray<float>>(std::vector<float>(w.size(), 1.0f)));
    dev.push_back({d_idx.back()->get(), reinterpret_cast<const uint8_t*>(d_val.back()->get()),
                   w.size(), ValueFormat::kFp32});
  }
  const uint64_t guard = 4096;
  DeviceArray<float> d_dense(n + guard);
  DeviceArray<uint64_t> d_bad(1);
  ASSERT_EQ(d_dense.Poison() + d_bad.Poison(), "");
  for (bool accumulate : {false, true}) {
    ASSERT_TRUE(
        cuda::SparseSumToDense(dev, d_dense.get(), n, {accumulate, 1.0f}, d_bad.get(), nullptr)
            .ok());
    ASSERT_EQ(testing::DeviceSynchronize(), "");
    EXPECT_EQ(d_bad.Download()[0], want_bad);
    const std::vector<float> got = d_dense.Download();
    for (uint64_t i = n; i < n + guard; ++i) {
      ASSERT_TRUE(std::isnan(got[i])) << "written beyond n at " << i;
    }
  }
  // Null counter: the same memory safety, no count.
  ASSERT_TRUE(cuda::SparseSumToDense(dev, d_dense.get(), n, {false, 1.0f}, nullptr, nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
}

// Quantized payloads (QSGD of every width, sign), made by the CPU
// compressors, summed by both sides in worker order.
void RunQuantizedCase(uint64_t n, int workers, bool sign, uint32_t bits, uint32_t bucket,
                      bool accumulate, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message()
               << "n=" << n << " P=" << workers << " sign=" << sign << " bits=" << bits
               << " bucket=" << bucket << " accumulate=" << accumulate);
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
      cpu::QsgdCompress(g.data(), nullptr, n, bits, bucket, rng(), 3, scales[w].data(),
                        packed[w].data(), nullptr);
    }
    d_scales.push_back(std::make_unique<DeviceArray<uint8_t>>(scales[w]));
    d_packed.push_back(std::make_unique<DeviceArray<uint8_t>>(packed[w]));
    host.push_back({scales[w].data(), packed[w].data()});
    dev.push_back({d_scales.back()->get(), d_packed.back()->get()});
  }
  std::vector<float> dense(n);
  for (float& x : dense) x = dist(rng);
  DeviceArray<float> d_dense(n);
  ASSERT_EQ((accumulate ? d_dense.Upload(dense) : d_dense.Poison()), "");
  const QuantizedFormat format{sign, sign ? 1u : bits, bucket};
  const SparseSumOptions options{accumulate, 1.0f / std::max(workers, 1)};
  ASSERT_TRUE(cpu::QuantizedSumToDense(host, format, absl::MakeSpan(dense), options).ok());
  ASSERT_TRUE(cuda::QuantizedSumToDense(dev, format, d_dense.get(), n, options, nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ExpectSameFloats(dense, d_dense.Download(), "sum");
}

TEST(GpuDecodeAccumulateTest, QuantizedPayloadsBitIdentical) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 3001 : 1000003;
  for (uint32_t bits = 1; bits <= 8; ++bits) {
    for (bool accumulate : {false, true}) {
      RunQuantizedCase(n, 8, false, bits, 512, accumulate, rng);
    }
  }
  RunQuantizedCase(n, 8, true, 1, 512, false, rng);
  RunQuantizedCase(n, 3, false, 3, 7, true, rng);
  RunQuantizedCase(5000, 70, false, 4, 100, false, rng);
  // Every thread of the grid (8 blocks of 256 per SM) loops several times.
  if (!testing::QuickMode()) {
    const uint64_t big = 4 * 8 * static_cast<uint64_t>(testing::MultiprocessorCount()) * 256 + 5;
    RunQuantizedCase(big, 4, true, 1, 512, true, rng);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
