// Every CUDA compressor and decoder against its CPU reference, on fresh
// random inputs of several sizes and distributions (normal, heavy-tailed,
// many ties, all zeros, NaN/Inf): outputs poisoned before each run, then
// compared bit for bit (indices, value bytes, scales, packed codes, new
// residual, stats); approximate top-k, whose CPU version fills the band
// from a sample-bounded candidate set, is checked against its contract
// (same band, band filled in index order, EF rule) instead. Without a GPU every test
// prints SKIPPED.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/randomk.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/sparse.h"
#include "gradwire/kernels/cuda/topk.h"
#include "gradwire/kernels/element_math.h"
#include "tests/gpu_test_util.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

using testing::DeviceArray;

enum class Data { kNormal, kHeavyTail, kTies, kZeros, kNonFinite };
const Data kAllData[] = {Data::kNormal, Data::kHeavyTail, Data::kTies, Data::kZeros, Data::kNonFinite};
const ValueFormat kFormats[] = {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16};

std::vector<float> MakeData(Data kind, uint64_t n, std::mt19937_64& rng) {
  std::vector<float> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint64_t i = 0; i < n; ++i) {
    switch (kind) {
      case Data::kNormal: v[i] = normal(rng); break;
      case Data::kHeavyTail: v[i] = normal(rng) / (0.05f + std::fabs(normal(rng))); break;
      case Data::kTies: v[i] = static_cast<float>(static_cast<int>(rng() % 7) - 3) * 0.25f; break;
      case Data::kZeros: v[i] = 0.0f; break;
      case Data::kNonFinite: {
        const uint64_t r = rng() % 50;
        v[i] = r == 0 ? std::nanf("") : r == 1 ? std::numeric_limits<float>::infinity()
             : r == 2 ? -std::numeric_limits<float>::infinity() : normal(rng) * 1e5f;
        break;
      }
    }
  }
  return v;
}

// Under compute-sanitizer (GRADWIRE_GPU_QUICK) fewer distributions.
std::vector<Data> Distributions() {
  if (testing::QuickMode()) return {Data::kNormal, Data::kTies, Data::kNonFinite};
  return std::vector<Data>(std::begin(kAllData), std::end(kAllData));
}

std::string Name(Data d) {
  const char* names[] = {"normal", "heavy-tail", "ties", "zeros", "nonfinite"};
  return names[static_cast<int>(d)];
}

template <typename T>
void ExpectSameBytes(const std::vector<T>& cpu, const std::vector<T>& gpu, const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(std::memcmp(&cpu[i], &gpu[i], sizeof(T)), 0)
        << what << " differs at " << i << " (cpu " << +cpu[i] << ", gpu " << +gpu[i] << ")";
  }
}

void ExpectSameStats(const FusedStats& cpu, DeviceArray<FusedStats>& gpu) {
  const FusedStats g = gpu.Download()[0];
  EXPECT_EQ(cpu.selected, g.selected);
  EXPECT_EQ(cpu.nonfinite, g.nonfinite);
}

// ---------------------------------------------------------------- top-k --
// The GPU's approximate top-k contract: everything above the band is
// selected, the band is filled with its lowest-index elements, nothing
// below it is taken; values and residuals follow the fused EF rule. Hence
// every selected |acc| is >= the band's lower key and every unselected one
// below its upper key (a magnitude ratio of at most 1.125 for normal floats).
void CheckApprox(const std::vector<float>& grad, const std::vector<float>& residual, uint64_t k,
                 ValueFormat format, const ApproxTopKBand& band, const std::vector<uint32_t>& idx,
                 const std::vector<uint8_t>& val, const std::vector<float>& new_residual) {
  const uint64_t n = grad.size();
  const bool ef = !residual.empty();
  std::vector<float> acc(n);
  for (uint64_t i = 0; i < n; ++i) acc[i] = ef ? grad[i] + residual[i] : grad[i];
  std::vector<char> chosen(n, 0);
  uint64_t want_band = k - (k == 0 ? 0 : band.above);
  uint64_t j = 0;
  for (uint64_t i = 0; i < n && k > 0; ++i) {
    const uint32_t key = MagnitudeKey(acc[i]);
    const bool above = key >= band.upper_key;
    const bool in_band = key >= band.lower_key && key < band.upper_key;
    if (above || (in_band && want_band > 0)) {
      if (in_band) --want_band;
      chosen[i] = 1;
      ASSERT_LT(j, k) << "more than k elements qualify";
      ASSERT_EQ(idx[j], i) << "selected index " << j;
      const float v = LoadValue(val.data(), j, format);
      const float r = RoundToFormat(acc[i], format);
      ASSERT_EQ(std::memcmp(&v, &r, 4), 0) << "value " << j;
      ++j;
    }
  }
  ASSERT_EQ(j, k) << "selected count";
  if (!ef) return;
  for (uint64_t i = 0; i < n; ++i) {
    const float want = ResidualAfter(acc[i], chosen[i] ? RoundToFormat(acc[i], format) : 0.0f);
    ASSERT_EQ(std::memcmp(&want, &new_residual[i], 4), 0) << "residual " << i;
  }
}


enum class Selector { kExact, kApprox, kRandom };

void RunSelection(Selector sel, Data data, uint64_t n, uint64_t k, ValueFormat format, bool ef,
                  std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << "selector " << int(sel) << " data " << Name(data) << " n " << n
                                    << " k " << k << " format " << int(format) << " ef " << ef);
  const std::vector<float> grad = MakeData(data, n, rng);
  std::vector<float> residual = ef ? MakeData(data == Data::kNonFinite ? Data::kNormal : data, n, rng)
                                   : std::vector<float>();
  const uint64_t seed = rng(), step = rng() % 1000;
  // CPU reference.
  uint64_t cpu_temp_bytes = 0;
  std::vector<uint32_t> cpu_idx(k);
  std::vector<uint8_t> cpu_val(k * ValueWidth(format));
  std::vector<float> cpu_res = residual;
  FusedStats cpu_stats;
  ApproxTopKBand cpu_band;
  float* cres = ef ? cpu_res.data() : nullptr;
  switch (sel) {
    case Selector::kExact:
      cpu::TopKCompress(nullptr, &cpu_temp_bytes, nullptr, nullptr, n, k, format, nullptr, nullptr, nullptr);
      break;
    case Selector::kApprox:
      cpu::ApproxTopKCompress(nullptr, &cpu_temp_bytes, nullptr, nullptr, n, k, format, nullptr, nullptr, nullptr,
                              nullptr);
      break;
    case Selector::kRandom:
      cpu::RandomKCompress(nullptr, &cpu_temp_bytes, nullptr, nullptr, n, k, seed, step, format, nullptr,
                           nullptr, nullptr);
      break;
  }
  std::vector<uint64_t> cpu_temp(cpu_temp_bytes / 8 + 1);
  switch (sel) {
    case Selector::kExact:
      cpu::TopKCompress(cpu_temp.data(), &cpu_temp_bytes, grad.data(), cres, n, k, format, cpu_idx.data(),
                        cpu_val.data(), &cpu_stats);
      break;
    case Selector::kApprox:
      cpu::ApproxTopKCompress(cpu_temp.data(), &cpu_temp_bytes, grad.data(), cres, n, k, format, cpu_idx.data(),
                              cpu_val.data(), &cpu_stats, &cpu_band);
      break;
    case Selector::kRandom:
      cpu::RandomKCompress(cpu_temp.data(), &cpu_temp_bytes, grad.data(), cres, n, k, seed, step, format,
                           cpu_idx.data(), cpu_val.data(), &cpu_stats);
      break;
  }
  // GPU, outputs poisoned.
  DeviceArray<float> d_grad(grad), d_res(residual);
  DeviceArray<uint32_t> d_idx(k);
  DeviceArray<uint8_t> d_val(k * ValueWidth(format));
  DeviceArray<FusedStats> d_stats(1);
  DeviceArray<ApproxTopKBand> d_band(1);
  ASSERT_EQ(d_idx.Poison() + d_val.Poison() + d_stats.Poison() + d_band.Poison(), "");
  float* gres = ef ? d_res.get() : nullptr;
  uint64_t temp_bytes = 0;
  absl::Status st;
  auto call = [&](void* temp) {
    switch (sel) {
      case Selector::kExact:
        return cuda::TopKCompress(temp, &temp_bytes, d_grad.get(), gres, n, k, format, d_idx.get(), d_val.get(),
                                  d_stats.get(), nullptr);
      case Selector::kApprox:
        return cuda::ApproxTopKCompress(temp, &temp_bytes, d_grad.get(), gres, n, k, format, d_idx.get(),
                                        d_val.get(), d_stats.get(), d_band.get(), nullptr);
      case Selector::kRandom:
      default:
        return cuda::RandomKCompress(temp, &temp_bytes, d_grad.get(), gres, n, k, seed, step, format, d_idx.get(),
                                     d_val.get(), d_stats.get(), nullptr);
    }
  };
  ASSERT_TRUE(call(nullptr).ok());
  DeviceArray<uint8_t> temp(temp_bytes);
  ASSERT_EQ(temp.Poison(), "");  // the kernels must not rely on zeroed temp
  st = call(temp.get());
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ExpectSameStats(cpu_stats, d_stats);
  if (sel == Selector::kApprox) {
    // The CPU fills the band from its sampled candidates, the GPU from the
    // whole band in index order: equal bands, both within the tolerance,
    // not necessarily the same band members. Check the GPU's own contract.
    const ApproxTopKBand b = d_band.Download()[0];
    EXPECT_EQ(b.lower_key, cpu_band.lower_key);
    EXPECT_EQ(b.upper_key, cpu_band.upper_key);
    EXPECT_EQ(b.above, cpu_band.above);
    EXPECT_GE(b.in_band, cpu_band.in_band);
    CheckApprox(grad, residual, k, format, b, d_idx.Download(), d_val.Download(),
                ef ? d_res.Download() : std::vector<float>());
    return;
  }
  ExpectSameBytes(cpu_idx, d_idx.Download(), "indices");
  ExpectSameBytes(cpu_val, d_val.Download(), "values");
  if (ef) ExpectSameBytes(cpu_res, d_res.Download(), "residual");
  if (sel == Selector::kRandom) {  // receivers derive the same indices
    DeviceArray<uint32_t> d_only(k);
    ASSERT_EQ(d_only.Poison(), "");
    uint64_t bytes = 0;
    ASSERT_TRUE(cuda::RandomKIndices(nullptr, &bytes, seed, step, n, k, nullptr, nullptr).ok());
    DeviceArray<uint8_t> t2(bytes);
    ASSERT_TRUE(cuda::RandomKIndices(t2.get(), &bytes, seed, step, n, k, d_only.get(), nullptr).ok());
    ExpectSameBytes(cpu_idx, d_only.Download(), "random-k indices");
  }
}

std::vector<uint64_t> Ks(uint64_t n) {
  std::vector<uint64_t> ks = {0, n};
  if (n > 0) ks.push_back(1);
  for (double r : {0.001, 0.01, 0.1}) {
    const uint64_t k = static_cast<uint64_t>(r * n);
    if (k > 1 && k < n) ks.push_back(k);
  }
  return ks;
}

void SweepSelector(Selector sel) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 1000ull, 4097ull, 100003ull, 1ull << 20}) {
    for (Data data : Distributions()) {
      if (testing::QuickMode() && n > 100003) continue;
      for (uint64_t k : Ks(n)) {
        RunSelection(sel, data, n, k, kFormats[rng() % 3], rng() % 2 == 0, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  if (testing::QuickMode()) return;
  // A size large enough for many candidate chunks and grid-stride loops.
  RunSelection(sel, Data::kNormal, 25'600'000, 25'600, ValueFormat::kFp32, true, rng);
  RunSelection(sel, Data::kTies, 3'000'001, 300'000, ValueFormat::kBf16, true, rng);
}

TEST(GpuCompressTest, ExactTopKMatchesCpuBitForBit) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SweepSelector(Selector::kExact);
}

TEST(GpuCompressTest, ApproxTopKMeetsItsContract) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SweepSelector(Selector::kApprox);
}

TEST(GpuCompressTest, RandomKMatchesCpuForTheSameSeed) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  SweepSelector(Selector::kRandom);
}

// 16-bit gradients: the 2^15-bin path equals fp32 top-k on widened input.
TEST(GpuCompressTest, SixteenBitTopKMatchesWidenedCpu) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  GRADWIRE_SEEDED_RNG(rng);
  for (ValueFormat in : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    for (Data data : Distributions()) {
      for (uint64_t n : {1ull, 5000ull, 1ull << 20}) {
        if (testing::QuickMode() && n > 5000) continue;
        for (uint64_t k : Ks(n)) {
          SCOPED_TRACE(::testing::Message() << "in " << int(in) << " data " << Name(data) << " n " << n << " k " << k);
          const std::vector<float> raw = MakeData(data, n, rng);
          std::vector<uint16_t> bits(n);
          std::vector<float> widened(n);
          for (uint64_t i = 0; i < n; ++i) {
            bits[i] = in == ValueFormat::kFp16 ? FloatToHalfBits(raw[i]) : FloatToBf16Bits(raw[i]);
            widened[i] = in == ValueFormat::kFp16 ? HalfBitsToFloat(bits[i]) : Bf16BitsToFloat(bits[i]);
          }
          uint64_t tb = 0;
          cpu::TopKCompress(nullptr, &tb, nullptr, nullptr, n, k, ValueFormat::kFp32, nullptr, nullptr, nullptr);
          std::vector<uint64_t> t(tb / 8 + 1);
          std::vector<uint32_t> idx(k);
          std::vector<uint8_t> val(4 * k);
          FusedStats stats;
          cpu::TopKCompress(t.data(), &tb, widened.data(), nullptr, n, k, ValueFormat::kFp32, idx.data(), val.data(),
                            &stats);
          DeviceArray<uint16_t> d_bits(bits);
          DeviceArray<uint32_t> d_idx(k);
          DeviceArray<uint8_t> d_val(4 * k);
          DeviceArray<FusedStats> d_stats(1);
          ASSERT_EQ(d_idx.Poison() + d_val.Poison() + d_stats.Poison(), "");
          uint64_t bytes = 0;
          ASSERT_TRUE(cuda::TopKCompress16(nullptr, &bytes, d_bits.get(), in, n, k, ValueFormat::kFp32, nullptr,
                                           nullptr, nullptr, nullptr).ok());
          DeviceArray<uint8_t> temp(bytes);
          ASSERT_TRUE(cuda::TopKCompress16(temp.get(), &bytes, d_bits.get(), in, n, k, ValueFormat::kFp32,
                                           d_idx.get(), d_val.get(), d_stats.get(), nullptr).ok());
          ASSERT_EQ(testing::DeviceSynchronize(), "");
          ExpectSameBytes(idx, d_idx.Download(), "indices");
          ExpectSameBytes(val, d_val.Download(), "values");
          ExpectSameStats(stats, d_stats);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(GpuCompressTest, RejectsBadArguments) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  DeviceArray<float> g(8);
  uint64_t bytes = 0;
  ASSERT_TRUE(cuda::TopKCompress(nullptr, &bytes, g.get(), nullptr, 8, 9, ValueFormat::kFp32, nullptr, nullptr,
                                 nullptr, nullptr).ok());  // the size query checks nothing else
  DeviceArray<uint8_t> temp(bytes);
  EXPECT_EQ(cuda::TopKCompress(temp.get(), &bytes, g.get(), nullptr, 8, 9, ValueFormat::kFp32, nullptr, nullptr,
                               nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  uint64_t small = 16;
  DeviceArray<uint32_t> idx(4);
  DeviceArray<uint8_t> val(16);
  EXPECT_EQ(cuda::TopKCompress(temp.get(), &small, g.get(), nullptr, 8, 4, ValueFormat::kFp32, idx.get(), val.get(),
                               nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::QsgdCompress(g.get(), nullptr, 8, 9, 4, 0, 0, val.get(), val.get(), nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------ quantizers --
enum class Quant { kQsgd, kSign };

void RunQuant(Quant q, Data data, uint64_t n, uint32_t bits, uint32_t bucket, bool ef, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << (q == Quant::kQsgd ? "qsgd" : "sign") << " data " << Name(data) << " n " << n
                                    << " bits " << bits << " bucket " << bucket << " ef " << ef);
  const std::vector<float> grad = MakeData(data, n, rng);
  std::vector<float> residual = ef ? MakeData(Data::kNormal, n, rng) : std::vector<float>();
  const uint64_t seed = rng(), step = rng() % 100;
  const uint64_t nscales = BucketCount(n, bucket), npacked = PackedBytes(n, bits);
  // Sections at odd offsets, as inside a frame.
  std::vector<uint8_t> cpu_scales(4 * nscales + 1), cpu_packed(npacked + 3);
  std::vector<float> cpu_res = residual;
  FusedStats cpu_stats;
  if (q == Quant::kQsgd) {
    cpu::QsgdCompress(grad.data(), ef ? cpu_res.data() : nullptr, n, bits, bucket, seed, step, cpu_scales.data() + 1,
                      cpu_packed.data() + 3, &cpu_stats);
  } else {
    cpu::SignCompress(grad.data(), ef ? cpu_res.data() : nullptr, n, bucket, cpu_scales.data() + 1,
                      cpu_packed.data() + 3, &cpu_stats);
  }
  DeviceArray<float> d_grad(grad), d_res(residual);
  DeviceArray<uint8_t> d_scales(cpu_scales.size()), d_packed(cpu_packed.size());
  DeviceArray<FusedStats> d_stats(1);
  ASSERT_EQ(d_scales.Poison() + d_packed.Poison() + d_stats.Poison(), "");
  // The bytes before the sections are the CPU's (never written by either).
  cpu_scales[0] = 0xFF;
  for (int i = 0; i < 3 && i < int(cpu_packed.size()); ++i) cpu_packed[i] = 0xFF;
  absl::Status st =
      q == Quant::kQsgd
          ? cuda::QsgdCompress(d_grad.get(), ef ? d_res.get() : nullptr, n, bits, bucket, seed, step,
                               d_scales.get() + 1, d_packed.get() + 3, d_stats.get(), nullptr)
          : cuda::SignCompress(d_grad.get(), ef ? d_res.get() : nullptr, n, bucket, d_scales.get() + 1,
                               d_packed.get() + 3, d_stats.get(), nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  ExpectSameBytes(cpu_scales, d_scales.Download(), "scales");
  ExpectSameBytes(cpu_packed, d_packed.Download(), "packed codes");
  if (ef) ExpectSameBytes(cpu_res, d_res.Download(), "residual");
  ExpectSameStats(cpu_stats, d_stats);
  // Decoding adds the same values on both sides.
  std::vector<float> dense = MakeData(Data::kNormal, n, rng);
  DeviceArray<float> d_dense(dense);
  if (q == Quant::kQsgd) {
    cpu::QsgdDecodeAccumulate(cpu_scales.data() + 1, cpu_packed.data() + 3, n, bits, bucket, dense.data());
    ASSERT_TRUE(cuda::QsgdDecodeAccumulate(d_scales.get() + 1, d_packed.get() + 3, n, bits, bucket, d_dense.get(),
                                           nullptr).ok());
  } else {
    cpu::SignDecodeAccumulate(cpu_scales.data() + 1, cpu_packed.data() + 3, n, bucket, dense.data());
    ASSERT_TRUE(
        cuda::SignDecodeAccumulate(d_scales.get() + 1, d_packed.get() + 3, n, bucket, d_dense.get(), nullptr).ok());
  }
  ExpectSameBytes(dense, d_dense.Download(), "decoded");
}

TEST(GpuCompressTest, QsgdMatchesCpuBitForBit) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 7ull, 1000ull, 100003ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1000) continue;
    for (Data data : Distributions()) {
      for (uint32_t bits = 1; bits <= 8; ++bits) {
        if (testing::QuickMode() && bits != 1 && bits != 3 && bits != 8) continue;
        // Group path (512, 3, 1), bucket not dividing n, two-pass path (5000, 65536).
        for (uint32_t bucket : {512u, 3u, 1u, 5000u, 65536u}) {
          if (testing::QuickMode() && (bucket == 1 || bucket == 65536)) continue;
          RunQuant(Quant::kQsgd, data, n, bits, bucket, rng() % 2 == 0, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(GpuCompressTest, SignMatchesCpuBitForBit) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 7ull, 1000ull, 100003ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1000) continue;
    for (Data data : Distributions()) {
      for (uint32_t bucket : {512u, 3u, 1u, 5000u, 65536u}) {
        RunQuant(Quant::kSign, data, n, 1, bucket, rng() % 2 == 0, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// ------------------------------------------------------- casts, decoding --
TEST(GpuCompressTest, CastsAndSparseDecodeMatchCpu) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {0ull, 1ull, 1001ull, 1ull << 20}) {
    if (testing::QuickMode() && n > 1001) continue;
    for (Data data : Distributions()) {
      for (ValueFormat f : kFormats) {
        SCOPED_TRACE(::testing::Message() << "cast data " << Name(data) << " n " << n << " format " << int(f));
        const std::vector<float> grad = MakeData(data, n, rng);
        std::vector<float> res = MakeData(Data::kNormal, n, rng);
        std::vector<uint8_t> vals(n * ValueWidth(f) + 1);
        FusedStats stats;
        DeviceArray<float> d_grad(grad), d_res(res);
        cpu::CastCompress(grad.data(), res.data(), n, f, vals.data() + 1, &stats);
        DeviceArray<uint8_t> d_vals(vals.size());
        DeviceArray<FusedStats> d_stats(1);
        ASSERT_EQ(d_vals.Poison() + d_stats.Poison(), "");
        vals[0] = 0xFF;
        ASSERT_TRUE(cuda::CastCompress(d_grad.get(), d_res.get(), n, f, d_vals.get() + 1, d_stats.get(), nullptr).ok());
        ASSERT_EQ(testing::DeviceSynchronize(), "");
        ExpectSameBytes(vals, d_vals.Download(), "cast values");
        ExpectSameBytes(res, d_res.Download(), "residual");
        ExpectSameStats(stats, d_stats);
        std::vector<float> dense = MakeData(Data::kNormal, n, rng);
        DeviceArray<float> d_dense(dense);
        cpu::CastDecodeAccumulate(vals.data() + 1, n, f, dense.data());
        ASSERT_TRUE(cuda::CastDecodeAccumulate(d_vals.get() + 1, n, f, d_dense.get(), nullptr).ok());
        ExpectSameBytes(dense, d_dense.Download(), "cast decoded");
        // Sparse decode of every third element.
        std::vector<uint32_t> idx;
        for (uint64_t i = 0; i < n; i += 3) idx.push_back(static_cast<uint32_t>(i));
        DeviceArray<uint32_t> d_idx(idx);
        cpu::SparseDecodeAccumulate(idx.data(), vals.data() + 1, idx.size(), f, dense.data());
        ASSERT_TRUE(
            cuda::SparseDecodeAccumulate(d_idx.get(), d_vals.get() + 1, idx.size(), f, d_dense.get(), nullptr).ok());
        ExpectSameBytes(dense, d_dense.Download(), "sparse decoded");
        if (HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire

namespace gradwire {
namespace kernels {
namespace {

// n above 2^31: every offset must be 64-bit. Needs ~30 GB of device and
// ~45 GB of host memory and a minute of CPU reference time, so it runs only
// with GRADWIRE_GPU_LARGE=1 (tools/gpu/run_on_device.sh run large).
TEST(GpuCompressTest, SizesAboveTwoToThe31) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  if (std::getenv("GRADWIRE_GPU_LARGE") == nullptr) {
    std::printf("SKIPPED: set GRADWIRE_GPU_LARGE=1 to run the n > 2^31 cases\n");
    GTEST_SKIP() << "GRADWIRE_GPU_LARGE not set";
  }
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = (uint64_t{1} << 31) + 1001;
  RunSelection(Selector::kExact, Data::kNormal, n, n / 1000, ValueFormat::kFp16, true, rng);
  if (HasFatalFailure()) return;
  RunQuant(Quant::kQsgd, Data::kNormal, (uint64_t{1} << 31) + 9, 4, 512, true, rng);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
