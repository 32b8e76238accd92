// The CUDA dense compressors (QSGD, sign, casts) and single-payload decoders
// against their CPU references, on fresh random inputs (the seed is
// printed), outputs poisoned and placed at odd offsets as inside a frame:
// scales, packed codes, values, new residual, stats and decoded sums bit
// for bit (NaN payloads aside). Selections are gpu_topk_test.cc.
//
// Every bits x bucket x error feedback and every value format x error
// feedback combination runs every time; fp16/bf16 specials (negative,
// subnormal, saturating, ±Inf, NaN) are one of the distributions. Beyond
// the sweeps: a size that gives every block several groups and units
// (n > 4 * 8 * SMs * 4096), a non-blocking stream, a CUDA graph replayed
// on new data, refused calls that must leave stats untouched, and n > 2^32
// behind GRADWIRE_GPU_LARGE. Without a GPU every test prints SKIPPED.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/sparse.h"
#include "gradwire/kernels/element_math.h"
#include "tests/gpu_test_data.h"
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;

std::vector<Data> Distributions() {
  if (testing::QuickMode()) return {Data::kNormal, Data::kTies, Data::kNonFinite};
  return std::vector<Data>(std::begin(kAllData), std::end(kAllData));
}

cuda::Stream StreamOf(testing::TestStream* s) { return s != nullptr ? s->get() : nullptr; }
std::string Sync(testing::TestStream* s) {
  return s != nullptr ? s->Synchronize() : testing::DeviceSynchronize();
}

// ------------------------------------------------------------ quantizers --
enum class Quant { kQsgd, kSign };

void RunQuant(Quant q, Data data, uint64_t n, uint32_t bits, uint32_t bucket, bool ef,
              std::mt19937_64& rng, testing::TestStream* stream = nullptr) {
  SCOPED_TRACE(::testing::Message()
               << (q == Quant::kQsgd ? "qsgd" : "sign") << " data " << Name(data) << " n " << n
               << " bits " << bits << " bucket " << bucket << " ef " << ef);
  const std::vector<float> grad = MakeData(data, n, rng);
  const std::vector<float> residual = ef ? MakeResidual(data, n, rng) : std::vector<float>();
  const uint64_t seed = rng(), step = rng() % 100;
  const uint64_t nscales = BucketCount(n, bucket), npacked = PackedBytes(n, bits);
  // Sections at odd offsets, as inside a frame.
  std::vector<uint8_t> cpu_scales(4 * nscales + 1, 0xFF), cpu_packed(npacked + 3, 0xFF);
  std::vector<float> cpu_res = residual;
  FusedStats cpu_stats;
  if (q == Quant::kQsgd) {
    cpu::QsgdCompress(grad.data(), ef ? cpu_res.data() : nullptr, n, bits, bucket, seed, step,
                      cpu_scales.data() + 1, cpu_packed.data() + 3, &cpu_stats);
  } else {
    cpu::SignCompress(grad.data(), ef ? cpu_res.data() : nullptr, n, bucket, cpu_scales.data() + 1,
                      cpu_packed.data() + 3, &cpu_stats);
  }
  DeviceArray<float> d_grad(grad), d_res(residual);
  DeviceArray<uint8_t> d_scales(cpu_scales.size()), d_packed(cpu_packed.size());
  DeviceArray<FusedStats> d_stats(1);
  ASSERT_EQ(testing::InOrder({d_grad.error(), d_res.error(), d_scales.Poison(), d_packed.Poison(),
                              d_stats.Poison(), testing::DeviceSynchronize()}),
            "");
  const absl::Status st =
      q == Quant::kQsgd ? cuda::QsgdCompress(d_grad.get(), ef ? d_res.get() : nullptr, n, bits,
                                             bucket, seed, step, d_scales.get() + 1,
                                             d_packed.get() + 3, d_stats.get(), StreamOf(stream))
                        : cuda::SignCompress(d_grad.get(), ef ? d_res.get() : nullptr, n, bucket,
                                             d_scales.get() + 1, d_packed.get() + 3, d_stats.get(),
                                             StreamOf(stream));
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(Sync(stream), "");
  ExpectSameBytes(cpu_scales, d_scales.Download(), "scales");
  ExpectSameBytes(cpu_packed, d_packed.Download(), "packed codes");
  if (ef) ExpectSameFloats(cpu_res, d_res.Download(), "residual");
  ExpectSameStats(cpu_stats, d_stats);
  // Decoding adds the same values on both sides.
  std::vector<float> dense = MakeData(Data::kNormal, n, rng);
  DeviceArray<float> d_dense(dense);
  ASSERT_EQ(d_dense.error() + testing::DeviceSynchronize(), "");
  if (q == Quant::kQsgd) {
    cpu::QsgdDecodeAccumulate(cpu_scales.data() + 1, cpu_packed.data() + 3, n, bits, bucket,
                              dense.data());
    ASSERT_TRUE(cuda::QsgdDecodeAccumulate(d_scales.get() + 1, d_packed.get() + 3, n, bits, bucket,
                                           d_dense.get(), StreamOf(stream))
                    .ok());
  } else {
    cpu::SignDecodeAccumulate(cpu_scales.data() + 1, cpu_packed.data() + 3, n, bucket,
                              dense.data());
    ASSERT_TRUE(cuda::SignDecodeAccumulate(d_scales.get() + 1, d_packed.get() + 3, n, bucket,
                                           d_dense.get(), StreamOf(stream))
                    .ok());
  }
  ASSERT_EQ(Sync(stream), "");
  ExpectSameFloats(dense, d_dense.Download(), "decoded");
}

// Group path (512, 3, 1: buckets that divide a group, do not divide n, and
// need 8 per byte), two-pass path (5000, 65536).
const uint32_t kBuckets[] = {512u, 3u, 1u, 5000u, 65536u};

TEST(GpuCompressTest, QsgdMatchesCpuBitForBit) {
  GRADWIRE_GPU_TEST(rng);
  for (uint64_t n : {0ull, 1ull, 7ull, 1000ull, 100003ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1000) continue;
    for (Data data : Distributions()) {
      for (uint32_t bits = 1; bits <= 8; ++bits) {
        if (testing::QuickMode() && bits != 1 && bits != 3 && bits != 8) continue;
        for (uint32_t bucket : kBuckets) {
          if (testing::QuickMode() && (bucket == 1 || bucket == 65536)) continue;
          for (bool ef : {false, true}) {
            RunQuant(Quant::kQsgd, data, n, bits, bucket, ef, rng);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(GpuCompressTest, SignMatchesCpuBitForBit) {
  GRADWIRE_GPU_TEST(rng);
  for (uint64_t n : {0ull, 1ull, 7ull, 1000ull, 100003ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1000) continue;
    for (Data data : Distributions()) {
      for (uint32_t bucket : kBuckets) {
        for (bool ef : {false, true}) {
          RunQuant(Quant::kSign, data, n, 1, bucket, ef, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Each block of the group kernel gets >= 4 groups of 4096 elements, the
// two-pass path's scale kernel >= 3 buckets and its unit kernel several
// grid strides; the decoders loop too.
TEST(GpuCompressTest, QuantizersLoopOverSeveralGroupsPerBlock) {
  GRADWIRE_GPU_TEST(rng);
  GRADWIRE_GPU_SMS(sms);
  const uint64_t n = testing::QuickMode() ? 8 * sms * 4096 + 9 : 4 * 8 * sms * 4096 + 9;
  std::printf("n = %llu\n", static_cast<unsigned long long>(n));
  for (bool ef : {false, true}) {
    RunQuant(Quant::kQsgd, Data::kHeavyTail, n, 4, 512, ef, rng);
    RunQuant(Quant::kSign, Data::kNonFinite, n, 1, 512, ef, rng);
    RunQuant(Quant::kQsgd, Data::kNormal, n, 3, 5000, ef, rng);
    RunQuant(Quant::kSign, Data::kSpecials, n, 1, 5000, ef, rng);
    if (HasFatalFailure()) return;
  }
}

// --------------------------------------------------- casts, sparse decode --
void RunCast(Data data, uint64_t n, ValueFormat f, bool ef, std::mt19937_64& rng,
             testing::TestStream* stream = nullptr) {
  SCOPED_TRACE(::testing::Message()
               << "cast data " << Name(data) << " n " << n << " format " << int(f) << " ef " << ef);
  const std::vector<float> grad = MakeData(data, n, rng);
  std::vector<float> res = ef ? MakeResidual(data, n, rng) : std::vector<float>();
  DeviceArray<float> d_grad(grad), d_res(res);
  std::vector<uint8_t> vals(n * ValueWidth(f) + 1, 0xFF);
  FusedStats stats;
  cpu::CastCompress(grad.data(), ef ? res.data() : nullptr, n, f, vals.data() + 1, &stats);
  DeviceArray<uint8_t> d_vals(vals.size());
  DeviceArray<FusedStats> d_stats(1);
  ASSERT_EQ(testing::InOrder({d_grad.error(), d_res.error(), d_vals.Poison(), d_stats.Poison(),
                              testing::DeviceSynchronize()}),
            "");
  ASSERT_TRUE(cuda::CastCompress(d_grad.get(), ef ? d_res.get() : nullptr, n, f, d_vals.get() + 1,
                                 d_stats.get(), StreamOf(stream))
                  .ok());
  ASSERT_EQ(Sync(stream), "");
  const std::vector<uint8_t> got = d_vals.Download();
  ExpectSameValues(vals, got, 1, n, f, "cast value");
  if (ef) ExpectSameFloats(res, d_res.Download(), "residual");
  ExpectSameStats(stats, d_stats);
  // Decode what each side encoded (bit-identical but for NaN payloads).
  std::vector<float> dense = MakeData(Data::kNormal, n, rng);
  DeviceArray<float> d_dense(dense);
  ASSERT_EQ(d_dense.error() + testing::DeviceSynchronize(), "");
  cpu::CastDecodeAccumulate(vals.data() + 1, n, f, dense.data());
  ASSERT_TRUE(
      cuda::CastDecodeAccumulate(d_vals.get() + 1, n, f, d_dense.get(), StreamOf(stream)).ok());
  ASSERT_EQ(Sync(stream), "");
  ExpectSameFloats(dense, d_dense.Download(), "cast decoded");
  // Sparse decode of every third element.
  std::vector<uint32_t> idx;
  for (uint64_t i = 0; i < n; i += 3) idx.push_back(static_cast<uint32_t>(i));
  DeviceArray<uint32_t> d_idx(idx);
  ASSERT_EQ(d_idx.error() + testing::DeviceSynchronize(), "");
  cpu::SparseDecodeAccumulate(idx.data(), vals.data() + 1, idx.size(), f, dense.data());
  ASSERT_TRUE(cuda::SparseDecodeAccumulate(d_idx.get(), d_vals.get() + 1, idx.size(), f,
                                           d_dense.get(), StreamOf(stream))
                  .ok());
  ASSERT_EQ(Sync(stream), "");
  ExpectSameFloats(dense, d_dense.Download(), "sparse decoded");
}

TEST(GpuCompressTest, CastsAndSparseDecodeMatchCpu) {
  GRADWIRE_GPU_TEST(rng);
  for (uint64_t n : {0ull, 1ull, 1001ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1001) continue;
    for (Data data : Distributions()) {
      for (ValueFormat f : kFormats) {
        for (bool ef : {false, true}) {
          RunCast(data, n, f, ef, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// All of it on a stream that does not synchronize with the default stream.
TEST(GpuCompressTest, NonBlockingStream) {
  GRADWIRE_GPU_TEST(rng);
  testing::TestStream stream;
  ASSERT_EQ(stream.error(), "");
  const uint64_t n = testing::QuickMode() ? 20011 : 2000003;
  RunQuant(Quant::kQsgd, Data::kNormal, n, 4, 512, true, rng, &stream);
  RunQuant(Quant::kQsgd, Data::kNormal, n, 2, 65536, true, rng, &stream);
  RunQuant(Quant::kSign, Data::kHeavyTail, n, 1, 512, true, rng, &stream);
  for (ValueFormat f : kFormats) RunCast(Data::kSpecials, n, f, true, rng, &stream);
}

// QSGD and a cast captured into one CUDA graph (global capture mode) and
// replayed on new gradients: three steps of error feedback, each checked
// against the CPU's step.
TEST(GpuCompressTest, GraphReplayMatchesCpuStepByStep) {
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = testing::QuickMode() ? 10007 : 1000003;
  const uint32_t bits = 4, bucket = 512;
  const uint64_t seed = rng(), step = 5;
  testing::TestStream stream;
  DeviceArray<float> d_grad(n), d_res_q(n), d_res_c(n);
  DeviceArray<uint8_t> d_scales(4 * BucketCount(n, bucket)), d_packed(PackedBytes(n, bits));
  DeviceArray<uint8_t> d_vals(2 * n);
  DeviceArray<FusedStats> d_stats_q(1), d_stats_c(1);
  std::vector<float> res_q = MakeData(Data::kNormal, n, rng), res_c = res_q;
  ASSERT_EQ(
      stream.error() + d_res_q.Upload(res_q) + d_res_c.Upload(res_c) + testing::DeviceSynchronize(),
      "");
  testing::TestGraph graph;
  ASSERT_EQ(graph.Begin(stream.get()), "");
  const absl::Status q =
      cuda::QsgdCompress(d_grad.get(), d_res_q.get(), n, bits, bucket, seed, step, d_scales.get(),
                         d_packed.get(), d_stats_q.get(), stream.get());
  const absl::Status c = cuda::CastCompress(d_grad.get(), d_res_c.get(), n, ValueFormat::kFp16,
                                            d_vals.get(), d_stats_c.get(), stream.get());
  ASSERT_EQ(graph.End(), "");
  ASSERT_TRUE(q.ok()) << q;
  ASSERT_TRUE(c.ok()) << c;
  std::printf("graph of %d nodes\n", graph.nodes());
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE(::testing::Message() << "replay " << replay);
    const std::vector<float> grad = MakeData(Data::kHeavyTail, n, rng);
    ASSERT_EQ(testing::InOrder({d_grad.Upload(grad), d_scales.Poison(), d_packed.Poison(),
                                d_vals.Poison(), d_stats_q.Poison(), d_stats_c.Poison(),
                                testing::DeviceSynchronize()}),
              "");
    ASSERT_EQ(testing::InOrder({graph.Launch(), stream.Synchronize()}), "");
    std::vector<uint8_t> scales(4 * BucketCount(n, bucket)), packed(PackedBytes(n, bits));
    std::vector<uint8_t> vals(2 * n);
    FusedStats stats_q, stats_c;
    cpu::QsgdCompress(grad.data(), res_q.data(), n, bits, bucket, seed, step, scales.data(),
                      packed.data(), &stats_q);
    cpu::CastCompress(grad.data(), res_c.data(), n, ValueFormat::kFp16, vals.data(), &stats_c);
    ExpectSameBytes(scales, d_scales.Download(), "scales");
    ExpectSameBytes(packed, d_packed.Download(), "packed codes");
    ExpectSameFloats(res_q, d_res_q.Download(), "qsgd residual");
    ExpectSameStats(stats_q, d_stats_q);
    ExpectSameValues(vals, d_vals.Download(), 0, n, ValueFormat::kFp16, "cast value");
    ExpectSameFloats(res_c, d_res_c.Download(), "cast residual");
    ExpectSameStats(stats_c, d_stats_c);
    if (HasFatalFailure()) return;
  }
}

// A refused call writes nothing: not the outputs, not stats (QSGD and sign
// used to clear stats before they checked bucket_size).
TEST(GpuCompressTest, RefusedCallsLeaveStatsUntouched) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  DeviceArray<float> g(8);
  DeviceArray<uint8_t> out(64);
  DeviceArray<FusedStats> stats(1);
  ASSERT_EQ(stats.Poison() + out.Poison(), "");
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(cuda::QsgdCompress(g.get(), nullptr, 8, 9, 4, 0, 0, out.get(), out.get(), stats.get(),
                               nullptr)
                .code(),
            kInvalid);
  EXPECT_EQ(cuda::QsgdCompress(g.get(), nullptr, 8, 4, 0, 0, 0, out.get(), out.get(), stats.get(),
                               nullptr)
                .code(),
            kInvalid);
  EXPECT_EQ(
      cuda::SignCompress(g.get(), nullptr, 8, 0, out.get(), out.get(), stats.get(), nullptr).code(),
      kInvalid);
  EXPECT_EQ(
      cuda::QsgdCompress(g.get(), nullptr, 8, 4, 4, 0, 0, nullptr, out.get(), stats.get(), nullptr)
          .code(),
      kInvalid);
  EXPECT_EQ(cuda::CastCompress(g.get(), nullptr, 8, static_cast<ValueFormat>(3), out.get(),
                               stats.get(), nullptr)
                .code(),
            kInvalid);
  EXPECT_EQ(
      cuda::CastCompress(nullptr, nullptr, 8, ValueFormat::kFp16, out.get(), stats.get(), nullptr)
          .code(),
      kInvalid);
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const FusedStats s = stats.Download()[0];
  EXPECT_EQ(s.selected, ~uint64_t{0});
  EXPECT_EQ(s.nonfinite, ~uint64_t{0});
  EXPECT_EQ(out.Download(), std::vector<uint8_t>(64, 0xFF));
}

// n above 2^32: every offset must be 64-bit. ~40 GB of device and ~60 GB
// of host memory, so only with GRADWIRE_GPU_LARGE=1
// (tools/gpu/run_on_device.sh run large).
TEST(GpuCompressTest, QsgdAboveTwoToThe32) {
  GRADWIRE_SKIP_UNLESS_LARGE("n > 2^32");
  GRADWIRE_GPU_TEST(rng);
  const uint64_t n = (uint64_t{1} << 32) + 9;
  const uint32_t bits = 4, bucket = 512;
  const uint64_t seed = rng();
  const std::vector<float> grad = FastData(n, rng());
  std::vector<float> res = FastData(n, rng());
  DeviceArray<float> d_grad(grad), d_res(res);
  DeviceArray<uint8_t> d_scales(4 * BucketCount(n, bucket)), d_packed(PackedBytes(n, bits));
  DeviceArray<FusedStats> d_stats(1);
  ASSERT_EQ(d_grad.error() + d_res.error() + d_scales.Poison() + d_packed.Poison(), "");
  ASSERT_TRUE(cuda::QsgdCompress(d_grad.get(), d_res.get(), n, bits, bucket, seed, 3,
                                 d_scales.get(), d_packed.get(), d_stats.get(), nullptr)
                  .ok());
  std::vector<uint8_t> scales(4 * BucketCount(n, bucket)), packed(PackedBytes(n, bits));
  FusedStats stats;
  cpu::QsgdCompress(grad.data(), res.data(), n, bits, bucket, seed, 3, scales.data(), packed.data(),
                    &stats);
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ExpectSameBytes(scales, d_scales.Download(), "scales");
  ExpectSameBytes(packed, d_packed.Download(), "packed codes");
  ExpectSameStats(stats, d_stats);
  ExpectSameFloats(res, d_res.Download(), "residual");
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
