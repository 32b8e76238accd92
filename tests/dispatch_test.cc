// Dispatch routes by where buffers live: host buffers get the CPU
// reference's exact results; device buffers get the CUDA kernel's (same
// bits); buffers split between host and device are refused.
//
// The host tests stand in for the CUDA runtime through
// dispatch_internal::SetRuntimeForTesting, so the routing rules (errors
// are returned, null buffers do not vote, each buffer is located once, the
// device count is asked once) are checked on every machine, GPU or not.
#include "gradwire/kernels/dispatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/topk.h"
#include "tests/gpu_test_util.h"
#include "tests/same_bits.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

using dispatch_internal::Runtime;

std::vector<float> Normal(uint64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ----------------------------------------------- a stand-in CUDA runtime --
// Pointers in `device` are "device memory" (never dereferenced by these
// tests); `fail` makes every query fail as after a sticky CUDA error.
struct FakeCuda {
  static inline int devices = 1;
  static inline bool fail = false;
  static inline std::set<const void*> device;
  static inline int count_calls = 0;
  static inline int locate_calls = 0;

  static int DeviceCount() {
    ++count_calls;
    return devices;
  }
  static absl::Status Locate(const void* ptr, Location* where) {
    ++locate_calls;
    if (fail) return absl::InternalError("cudaErrorIllegalAddress (stand-in)");
    *where = device.count(ptr) ? Location::kDevice : Location::kHost;
    return absl::OkStatus();
  }
  static constexpr Runtime kRuntime = {DeviceCount, Locate};
};

class DispatchSeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCuda::devices = 1;
    FakeCuda::fail = false;
    FakeCuda::device.clear();
    FakeCuda::count_calls = 0;
    FakeCuda::locate_calls = 0;
    dispatch_internal::SetRuntimeForTesting(&FakeCuda::kRuntime);
  }
  void TearDown() override { dispatch_internal::SetRuntimeForTesting(nullptr); }
};

// After a failed kernel every CUDA query fails. The old dispatch took any
// failure for "host memory" and ran the CPU reference on what could be
// device pointers; now the error comes back and nothing is touched.
TEST_F(DispatchSeamTest, ACudaErrorWhileLocatingIsReturnedNotTakenForHost) {
  FakeCuda::fail = true;
  const uint64_t n = 1000, k = 10;
  std::vector<float> grad(n, 1.0f), residual(n, 0.5f);
  const std::vector<float> residual_before = residual;
  uint64_t bytes = 0;  // the host's need (the stand-in has no real device to ask)
  cpu::TopKCompress(nullptr, &bytes, nullptr, nullptr, n, k, ValueFormat::kFp32, nullptr, nullptr,
                    nullptr);
  std::vector<uint64_t> temp(bytes / 8 + 1);
  std::vector<uint32_t> idx(k, 0xFFFFFFFFu);
  std::vector<uint8_t> val(4 * k, 0xFF);
  FusedStats stats{77, 77};
  const absl::Status s = TopKCompress(temp.data(), &bytes, grad.data(), residual.data(), n, k,
                                      ValueFormat::kFp32, idx.data(), val.data(), &stats);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("cudaErrorIllegalAddress"), absl::string_view::npos) << s;
  EXPECT_EQ(residual, residual_before);
  EXPECT_EQ(idx, std::vector<uint32_t>(k, 0xFFFFFFFFu));
  EXPECT_EQ(stats.selected, 77u);
  std::vector<float> dense(n, 0.0f);
  std::vector<uint8_t> values(2 * n, 0);
  EXPECT_EQ(CastDecodeAccumulate(values.data(), n, ValueFormat::kFp16, dense.data()).code(),
            absl::StatusCode::kInternal);
  Location where = Location::kDevice;
  EXPECT_EQ(Locate(grad.data(), &where).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Locate(grad.data()), Location::kHost);  // the display form still answers
}

// PyTorch's empty CUDA tensors have null data pointers: with n = 0 the
// gradient, residual and outputs may all be null while temp and stats are
// real device buffers. Null buffers live nowhere, so the call runs on the
// device; the old dispatch asked where the (null) gradient lives, got
// "host", and refused the device temp/stats as "split".
TEST_F(DispatchSeamTest, NullBuffersDoNotVote) {
  int dev_temp = 0, dev_stats = 0, host = 0;
  FakeCuda::device = {&dev_temp, &dev_stats};
  Location where = Location::kHost;
  absl::Status s = dispatch_internal::Place(
      "TopKCompress", {&dev_temp, nullptr, nullptr, nullptr, nullptr, &dev_stats}, &where);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(where, Location::kDevice);
  ASSERT_TRUE(dispatch_internal::Place("X", {nullptr, &host, nullptr}, &where).ok());
  EXPECT_EQ(where, Location::kHost);
  ASSERT_TRUE(dispatch_internal::Place("X", {nullptr, nullptr}, &where).ok());
  EXPECT_EQ(where, Location::kHost);  // nothing to read or write: the host
  s = dispatch_internal::Place("X", {nullptr, &dev_temp, &host}, &where);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("split between host and device"), absl::string_view::npos) << s;
  // The same rule end to end on the host: n = 0, null gradient, host stats.
  FusedStats stats{5, 5};
  // The host's own size query (the seam's fake device would answer the
  // dispatch's), then that much temp.
  uint64_t bytes = 0;
  cpu::TopKCompress(nullptr, &bytes, nullptr, nullptr, 0, 0, ValueFormat::kFp32, nullptr, nullptr,
                    nullptr);
  std::vector<uint64_t> temp(bytes / 8 + 1);
  ASSERT_TRUE(TopKCompress(temp.data(), &bytes, nullptr, nullptr, 0, 0, ValueFormat::kFp32, nullptr,
                           nullptr, &stats)
                  .ok());
  EXPECT_EQ(stats.selected, 0u);
  EXPECT_EQ(stats.nonfinite, 0u);
}

// The device count is asked once per process (not per call), and each
// distinct non-null buffer once per call.
TEST_F(DispatchSeamTest, DeviceCountOnceAndEachBufferOncePerCall) {
  const uint64_t n = 64;
  std::vector<float> grad(n, 1.0f), residual(n, 0.0f);
  std::vector<uint8_t> values(2 * n);
  FusedStats stats;
  for (int call = 0; call < 100; ++call) {
    ASSERT_TRUE(
        CastCompress(grad.data(), residual.data(), n, ValueFormat::kFp16, values.data(), &stats)
            .ok());
  }
  EXPECT_EQ(FakeCuda::count_calls, 1);
  EXPECT_EQ(FakeCuda::locate_calls, 100 * 4);
  FakeCuda::locate_calls = 0;
  Location where;
  ASSERT_TRUE(
      dispatch_internal::Place("X", {grad.data(), grad.data(), nullptr, values.data()}, &where)
          .ok());
  EXPECT_EQ(FakeCuda::locate_calls, 2);
  // Without a GPU nothing is located at all.
  FakeCuda::devices = 0;
  dispatch_internal::SetRuntimeForTesting(&FakeCuda::kRuntime);  // forget the cached count
  FakeCuda::locate_calls = 0;
  ASSERT_TRUE(
      CastCompress(grad.data(), residual.data(), n, ValueFormat::kFp16, values.data(), &stats)
          .ok());
  EXPECT_EQ(FakeCuda::locate_calls, 0);
}

// CastCompressInChunks: CastCompress's bits and stats, each buffer located
// once per call (not per chunk), its values handed out in order, chunk
// after chunk, every byte once, and host memory only.
TEST_F(DispatchSeamTest, CastInChunksIsCastCompressHandedOutChunkByChunk) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n :
       {uint64_t{0}, uint64_t{1}, uint64_t{9}, cpu::kCastChunkElements - 1, cpu::kCastChunkElements,
        cpu::kCastChunkElements + 1, 3 * cpu::kCastChunkElements + 77}) {
    for (ValueFormat f : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " format " << static_cast<int>(f));
      std::vector<float> grad = Normal(n, rng), res_a = Normal(n, rng), res_b = res_a;
      if (n > 0) grad[n / 2] = INFINITY;
      const uint64_t width = f == ValueFormat::kFp32 ? 4 : 2;
      std::vector<uint8_t> val_a(width * n, 0xee), val_b(width * n, 0xee);
      FusedStats st_a{9, 9}, st_b{9, 9};
      ASSERT_TRUE(CastCompress(grad.data(), res_a.data(), n, f, val_a.data(), &st_a).ok());
      FakeCuda::locate_calls = 0;
      uint64_t next = 0;  // where the next chunk must start
      std::vector<uint8_t> seen;
      ASSERT_TRUE(CastCompressInChunks(grad.data(), res_b.data(), n, f, val_b.data(), &st_b,
                                       [&](const uint8_t* chunk, uint64_t bytes) {
                                         EXPECT_EQ(chunk, val_b.data() + next);
                                         EXPECT_GT(bytes, 0u);
                                         next += bytes;
                                         seen.insert(seen.end(), chunk, chunk + bytes);
                                       })
                      .ok());
      // Each non-null buffer once (n = 0: empty vectors, only stats).
      EXPECT_EQ(FakeCuda::locate_calls, n > 0 ? 4 : 1);
      EXPECT_EQ(next, width * n);
      EXPECT_EQ(seen, val_a);  // written before it was handed out
      EXPECT_EQ(val_b, val_a);
      EXPECT_TRUE(testing::SameBits(res_b, res_a));
      EXPECT_EQ(st_b.selected, st_a.selected);
      EXPECT_EQ(st_b.nonfinite, st_a.nonfinite);
    }
  }
  std::vector<float> grad(8, 1.0f);
  std::vector<uint8_t> values(32);
  FakeCuda::device = {values.data()};
  int calls = 0;
  const absl::Status s =
      CastCompressInChunks(grad.data(), nullptr, 8, ValueFormat::kFp32, values.data(), nullptr,
                           [&](const uint8_t*, uint64_t) { ++calls; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  FakeCuda::device = {values.data(), grad.data()};
  EXPECT_EQ(CastCompressInChunks(grad.data(), nullptr, 8, ValueFormat::kFp32, values.data(),
                                 nullptr, [&](const uint8_t*, uint64_t) { ++calls; })
                .code(),
            absl::StatusCode::kInvalidArgument);  // all on the device: still host only
  EXPECT_EQ(calls, 0);
}

// ------------------------------------------------------ the real runtime --

TEST(DispatchTest, HostBuffersRunTheCpuReference) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 10000, k = 100;
  const std::vector<float> grad = Normal(n, rng);
  std::vector<float> res_a = Normal(n, rng), res_b = res_a;
  EXPECT_EQ(Locate(grad.data()), Location::kHost);
  Location where = Location::kDevice;
  ASSERT_TRUE(Locate(grad.data(), &where).ok());
  EXPECT_EQ(where, Location::kHost);
  uint64_t bytes = 0;
  ASSERT_TRUE(TopKCompress(nullptr, &bytes, grad.data(), res_a.data(), n, k, ValueFormat::kFp16,
                           nullptr, nullptr, nullptr)
                  .ok());
  std::vector<uint64_t> temp(bytes / 8 + 1);
  std::vector<uint32_t> idx_a(k), idx_b(k);
  std::vector<uint8_t> val_a(2 * k), val_b(2 * k);
  FusedStats st_a, st_b;
  ASSERT_TRUE(TopKCompress(temp.data(), &bytes, grad.data(), res_a.data(), n, k, ValueFormat::kFp16,
                           idx_a.data(), val_a.data(), &st_a)
                  .ok());
  cpu::TopKCompress(temp.data(), &bytes, grad.data(), res_b.data(), n, k, ValueFormat::kFp16,
                    idx_b.data(), val_b.data(), &st_b);
  EXPECT_EQ(idx_a, idx_b);
  EXPECT_EQ(val_a, val_b);
  EXPECT_EQ(res_a, res_b);
  EXPECT_EQ(st_a.selected, k);

  std::vector<uint8_t> scales(4 * BucketCount(n, 512)), packed(PackedBytes(n, 4));
  ASSERT_TRUE(
      QsgdCompress(grad.data(), nullptr, n, 4, 512, 1, 2, scales.data(), packed.data(), nullptr)
          .ok());
  std::vector<float> dense(n, 0.0f);
  ASSERT_TRUE(QsgdDecodeAccumulate(scales.data(), packed.data(), n, 4, 512, dense.data()).ok());
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(dense[i] - grad[i]), 2.0f * 5.0f / 15.0f + 1e-6f);
  }
}

// Top-k's outputs may stay inside its host temp, where
// TopKHostOutputsInTemp says (the same bits as buffers of the caller's
// own); any other output that overlaps temp is refused, nothing written.
TEST(DispatchTest, TopKOutputsInsideTempOnlyWhereTheKernelPutsThem) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 50000, k = 5000;
  const std::vector<float> grad = Normal(n, rng);
  for (bool approx : {false, true}) {
    SCOPED_TRACE(approx ? "approximate" : "exact");
    auto run = [&](void* temp, uint64_t* bytes, float* res, uint32_t* idx, uint8_t* val) {
      return approx ? ApproxTopKCompress(temp, bytes, grad.data(), res, n, k, ValueFormat::kFp32,
                                         idx, val, nullptr, nullptr)
                    : TopKCompress(temp, bytes, grad.data(), res, n, k, ValueFormat::kFp32, idx,
                                   val, nullptr);
    };
    uint64_t bytes = 0;
    ASSERT_TRUE(run(nullptr, &bytes, nullptr, nullptr, nullptr).ok());
    std::vector<uint64_t> temp(bytes / 8 + 1);
    std::vector<float> res_a = Normal(n, rng), res_b = res_a;
    std::vector<uint32_t> idx(k);
    std::vector<uint8_t> val(4 * k);
    ASSERT_TRUE(run(temp.data(), &bytes, res_a.data(), idx.data(), val.data()).ok());
    const OutputsInTemp there = TopKHostOutputsInTemp(temp.data(), n);
    ASSERT_TRUE(run(temp.data(), &bytes, res_b.data(), there.indices, there.values).ok());
    EXPECT_EQ(std::vector<uint32_t>(there.indices, there.indices + k), idx);
    EXPECT_EQ(std::vector<uint8_t>(there.values, there.values + 4 * k), val);
    EXPECT_EQ(res_a, res_b);
    // Elsewhere inside temp: refused before anything is written.
    const std::vector<float> before = res_b;
    uint8_t* inside = reinterpret_cast<uint8_t*>(temp.data()) + bytes / 2;
    EXPECT_EQ(run(temp.data(), &bytes, res_b.data(), idx.data(), inside).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(run(temp.data(), &bytes, res_b.data(), there.indices + 1, there.values).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(res_b, before);
  }
}

// Bad arguments are refused on the host path as on the device path, before
// anything is written (the CPU references themselves trust their callers).
// DeltaVarintAverage: a bad payload or a device buffer is refused before
// dense is touched; on the host it averages all of dense.
TEST_F(DispatchSeamTest, DeltaVarintAverageRefusesBeforeTouchingAnything) {
  std::vector<float> dense(10, 7.0f);
  const std::vector<uint8_t> idx = {4, 1};  // indices 4 and 6
  std::vector<float> val = {2.0f, 8.0f};
  const DeltaVarintPayload ok = {idx.data(), idx.size(),
                                 reinterpret_cast<const uint8_t*>(val.data()), 2,
                                 ValueFormat::kFp32};
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  auto span = absl::MakeSpan(dense);
  DeltaVarintPayload no_values = ok;
  no_values.values = nullptr;
  EXPECT_EQ(DeltaVarintAverage({no_values}, 2.0f, span).code(), kInvalid);
  DeltaVarintPayload no_indices = ok;
  no_indices.index_bytes = nullptr;
  EXPECT_EQ(DeltaVarintAverage({no_indices}, 2.0f, span).code(), kInvalid);
  DeltaVarintPayload bad_format = ok;
  bad_format.format = static_cast<ValueFormat>(9);
  EXPECT_EQ(DeltaVarintAverage({bad_format}, 2.0f, span).code(), kInvalid);
  FakeCuda::device.insert(val.data());
  EXPECT_EQ(DeltaVarintAverage({ok}, 2.0f, span).code(), kInvalid);  // device values
  FakeCuda::device.clear();
  FakeCuda::device.insert(idx.data());
  EXPECT_EQ(DeltaVarintAverage({ok}, 2.0f, span).code(), kInvalid);  // device indices
  FakeCuda::device.clear();
  FakeCuda::device.insert(dense.data());
  EXPECT_EQ(DeltaVarintAverage({}, 2.0f, span).code(), kInvalid);  // device dense
  EXPECT_EQ(dense, std::vector<float>(10, 7.0f));
  FakeCuda::device.clear();
  ASSERT_TRUE(DeltaVarintAverage({ok}, 2.0f, span).ok());
  EXPECT_EQ(dense, (std::vector<float>{0, 0, 0, 0, 1, 0, 4, 0, 0, 0}));
}

TEST(DispatchTest, HostPathValidatesBeforeTouchingAnything) {
  std::vector<float> g(4);
  uint64_t bytes = 0;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(TopKCompress(nullptr, &bytes, g.data(), nullptr, 4, 5, ValueFormat::kFp32, nullptr,
                         nullptr, nullptr)
                .code(),
            kInvalid);  // k > n
  EXPECT_EQ(TopKCompress(nullptr, nullptr, g.data(), nullptr, 4, 1, ValueFormat::kFp32, nullptr,
                         nullptr, nullptr)
                .code(),
            kInvalid);  // no temp_bytes
  ASSERT_TRUE(TopKCompress(nullptr, &bytes, nullptr, nullptr, 4, 1, ValueFormat::kFp32, nullptr,
                           nullptr, nullptr)
                  .ok());  // the size query needs no buffers
  std::vector<uint64_t> temp(bytes / 8 + 1);
  std::vector<uint32_t> idx(1);
  std::vector<uint8_t> val(4);
  EXPECT_EQ(TopKCompress(temp.data(), &bytes, nullptr, nullptr, 4, 1, ValueFormat::kFp32,
                         idx.data(), val.data(), nullptr)
                .code(),
            kInvalid);  // null gradient
  EXPECT_EQ(TopKCompress(temp.data(), &bytes, g.data(), nullptr, 4, 1, ValueFormat::kFp32, nullptr,
                         val.data(), nullptr)
                .code(),
            kInvalid);  // null indices
  // Random-k's compress takes null indices (values only: its frames carry
  // none), never null values.
  uint64_t compress_bytes = 0;
  ASSERT_TRUE(RandomKCompress(nullptr, &compress_bytes, nullptr, nullptr, 4, 1, 7, 0,
                              ValueFormat::kFp32, nullptr, nullptr, nullptr)
                  .ok());
  std::vector<uint64_t> compress_temp(compress_bytes / 8 + 1);
  EXPECT_TRUE(RandomKCompress(compress_temp.data(), &compress_bytes, g.data(), nullptr, 4, 1, 7, 0,
                              ValueFormat::kFp32, nullptr, val.data(), nullptr)
                  .ok());
  EXPECT_EQ(RandomKCompress(compress_temp.data(), &compress_bytes, g.data(), nullptr, 4, 1, 7, 0,
                            ValueFormat::kFp32, idx.data(), nullptr, nullptr)
                .code(),
            kInvalid);  // null values
  uint64_t small = 64;
  EXPECT_EQ(TopKCompress(temp.data(), &small, g.data(), nullptr, 4, 1, ValueFormat::kFp32,
                         idx.data(), val.data(), nullptr)
                .code(),
            kInvalid);  // too little temp storage
  EXPECT_EQ(TopKCompress(temp.data(), &bytes, g.data(), nullptr, 4, 1, static_cast<ValueFormat>(7),
                         idx.data(), val.data(), nullptr)
                .code(),
            kInvalid);  // unknown format
  std::vector<uint8_t> out(16, 0xAB);
  FusedStats stats{9, 9};
  EXPECT_EQ(QsgdCompress(g.data(), nullptr, 4, 0, 4, 0, 0, out.data(), out.data(), &stats).code(),
            kInvalid);
  EXPECT_EQ(QsgdCompress(g.data(), nullptr, 4, 4, 0, 0, 0, out.data(), out.data(), &stats).code(),
            kInvalid);
  EXPECT_EQ(SignCompress(g.data(), nullptr, 4, 0, out.data(), out.data(), &stats).code(), kInvalid);
  EXPECT_EQ(stats.selected, 9u);  // untouched
  EXPECT_EQ(out, std::vector<uint8_t>(16, 0xAB));
  EXPECT_EQ(CastCompress(g.data(), nullptr, 4, ValueFormat::kFp16, nullptr, nullptr).code(),
            kInvalid);
  EXPECT_EQ(SparseDecodeAccumulate(nullptr, out.data(), 2, ValueFormat::kFp32, g.data()).code(),
            kInvalid);
  EXPECT_EQ(QsgdDecodeAccumulate(out.data(), out.data(), 4, 4, 2, nullptr).code(), kInvalid);

  // Random-k's one-pass average: the same checks, and g left as it was.
  std::vector<float> avg(4, 5.0f);
  const uint8_t* payloads[] = {out.data(), out.data()};
  uint64_t rk_bytes = 0;
  ASSERT_TRUE(RandomKDecodeAverage(nullptr, &rk_bytes, 1, 2, 4, 2, {}, ValueFormat::kFp32, 2.0f,
                                   nullptr)
                  .ok());  // the size query needs no buffers
  std::vector<uint64_t> rk_temp(rk_bytes / 8 + 1);
  uint64_t rk_small = 0;
  for (const auto& [temp_ptr, temp_len, k, format, divisor, out_ptr] :
       std::vector<std::tuple<void*, uint64_t*, uint64_t, ValueFormat, float, float*>>{
           {rk_temp.data(), &rk_bytes, 5, ValueFormat::kFp32, 2.0f, avg.data()},  // k > n
           {rk_temp.data(), &rk_bytes, 2, static_cast<ValueFormat>(7), 2.0f, avg.data()},
           {rk_temp.data(), &rk_small, 2, ValueFormat::kFp32, 2.0f, avg.data()},  // small temp
           {rk_temp.data(), nullptr, 2, ValueFormat::kFp32, 2.0f, avg.data()},
           {rk_temp.data(), &rk_bytes, 2, ValueFormat::kFp32, 0.0f, avg.data()},  // divisor
           {rk_temp.data(), &rk_bytes, 2, ValueFormat::kFp32, -1.0f, avg.data()},
           {rk_temp.data(), &rk_bytes, 2, ValueFormat::kFp32, 2.0f, nullptr}}) {  // null out
    EXPECT_EQ(
        RandomKDecodeAverage(temp_ptr, temp_len, 1, 2, 4, k, payloads, format, divisor, out_ptr)
            .code(),
        kInvalid);
  }
  EXPECT_EQ(avg, std::vector<float>(4, 5.0f));
  ASSERT_TRUE(RandomKDecodeAverage(rk_temp.data(), &rk_bytes, 1, 2, 4, 2, payloads,
                                   ValueFormat::kFp32, 2.0f, avg.data())
                  .ok());
}

// The CUDA entry points check everything before their first CUDA call: on
// a machine without a GPU a refused call says InvalidArgument, not the
// missing device, and a bogus stats pointer is never written (quantize.cu
// used to clear stats before it checked bucket_size).
TEST(DispatchTest, CudaEntryPointsRefuseBeforeTouchingTheDevice) {
  if (!cuda::BuiltWithCuda() || cuda::DeviceCount() > 0) {
    std::printf("SKIPPED: needs a CUDA build on a machine without a GPU (device tests cover it)\n");
    GTEST_SKIP();
  }
  auto* bogus_stats = reinterpret_cast<FusedStats*>(uintptr_t{0x10});
  auto* bogus = reinterpret_cast<uint8_t*>(uintptr_t{0x20});
  const auto* grad = reinterpret_cast<const float*>(uintptr_t{0x40});
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(
      cuda::QsgdCompress(grad, nullptr, 8, 4, 0, 0, 0, bogus, bogus, bogus_stats, nullptr).code(),
      kInvalid);
  EXPECT_EQ(cuda::SignCompress(grad, nullptr, 8, 0, bogus, bogus, bogus_stats, nullptr).code(),
            kInvalid);
  EXPECT_EQ(
      cuda::QsgdCompress(grad, nullptr, 8, 9, 4, 0, 0, bogus, bogus, bogus_stats, nullptr).code(),
      kInvalid);
  EXPECT_EQ(cuda::CastCompress(nullptr, nullptr, 8, ValueFormat::kFp16, bogus, bogus_stats, nullptr)
                .code(),
            kInvalid);
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
  EXPECT_EQ(
      CastCompress(d_grad.get(), nullptr, n, ValueFormat::kFp16, host_out.data(), nullptr).code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(
      CastCompress(d_grad.get(), nullptr, n, ValueFormat::kFp16, d_out.get(), nullptr).ok());
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const std::vector<uint8_t> got = d_out.Download();
  std::vector<uint8_t> want(2 * n);
  ASSERT_TRUE(CastCompress(grad.data(), nullptr, n, ValueFormat::kFp16, want.data(), nullptr).ok());
  EXPECT_EQ(got, want);
}

// The n = 0 case for real: null gradient and outputs, device temp and
// stats. Runs on the device and writes stats {0, 0}.
TEST(DispatchTest, EmptyDeviceTensorsRunOnTheDevice) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  testing::DeviceArray<FusedStats> d_stats(1);
  ASSERT_EQ(d_stats.Poison(), "");
  uint64_t bytes = 0;
  ASSERT_TRUE(TopKCompress(nullptr, &bytes, nullptr, nullptr, 0, 0, ValueFormat::kFp32, nullptr,
                           nullptr, nullptr)
                  .ok());
  testing::DeviceArray<uint8_t> d_temp(bytes);
  const absl::Status s = TopKCompress(d_temp.get(), &bytes, nullptr, nullptr, 0, 0,
                                      ValueFormat::kFp32, nullptr, nullptr, d_stats.get());
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(testing::DeviceSynchronize(), "");
  const FusedStats got = d_stats.Download()[0];
  EXPECT_EQ(got.selected, 0u);
  EXPECT_EQ(got.nonfinite, 0u);
  ASSERT_TRUE(CastCompress(nullptr, nullptr, 0, ValueFormat::kFp16, nullptr, d_stats.get()).ok());
}

// The outputs TopKHostOutputsInTemp names are the CPU kernels' layout: a
// call that would run on the device refuses them, nothing written.
TEST(DispatchTest, DeviceRefusesTopKOutputsInsideTemp) {
  GRADWIRE_SKIP_WITHOUT_GPU();
  const uint64_t n = 4096, k = 40;
  testing::DeviceArray<float> d_grad(n);
  uint64_t bytes = 0;
  ASSERT_TRUE(TopKCompress(nullptr, &bytes, d_grad.get(), nullptr, n, k, ValueFormat::kFp32,
                           nullptr, nullptr, nullptr)
                  .ok());
  testing::DeviceArray<uint8_t> d_temp(bytes);
  const OutputsInTemp there = TopKHostOutputsInTemp(d_temp.get(), n);
  EXPECT_EQ(TopKCompress(d_temp.get(), &bytes, d_grad.get(), nullptr, n, k, ValueFormat::kFp32,
                         there.indices, there.values, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
