// Codecs on device buffers, with the host stand-in for a GPU
// (kernels/host_device.h): the device implementation is picked for device
// buffers, frames, residuals, averages and checkpoints equal the host
// path's bit for bit, only compact bytes cross, and misuse is refused.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gradwire/kernels/host_device.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gtest/gtest.h"
#include "tests/same_bits.h"
#include "tests/synthetic_gradient.h"

namespace gradwire {
namespace {

using kernels::CopyKind;
using kernels::HostDevice;

// Device floats, back on the host.
std::vector<float> Download(HostDevice& d, const float* p, size_t n, kernels::cuda::Stream s) {
  std::vector<float> v(n);
  EXPECT_TRUE(d.Copy(v.data(), p, n * 4, CopyKind::kDeviceToHost, s).ok());
  EXPECT_TRUE(d.WaitStream(s, absl::Now() + absl::Seconds(5)).ok());
  return v;
}
using testing::SameBits;

struct Case {
  const char* spec;
  const char* encode_kernel;  // the dispatch entry the device must run
};

class DeviceCodecTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceCodecTest, DevicePathEqualsHostPathBitForBit) {
  HostDevice device;  // deferred: a missing wait would read poison
  kernels::cuda::Stream stream = device.CreateStream();
  auto codec = *MakeCodec(*CompressionSpec::Parse(GetParam().spec));
  ErrorFeedback host_ef(*codec), device_ef(*codec);
  DeviceScratch scratch(device);
  DeviceCall call{&scratch, stream};
  const size_t n = 6000, p = 3;
  float* d_grad = static_cast<float*>(*device.Allocate(n * 4));
  float* d_out = static_cast<float*>(*device.Allocate(n * 4));
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<std::vector<uint8_t>> host_frames(p), device_frames(p);
    for (size_t r = 0; r < p; ++r) {
      std::vector<float> g = testing::SyntheticGradient(n, 10 * step + r);
      // Step 2: rank 1's gradient overflows (a flagged frame, codec.h).
      if (step == 2 && r == 1) g[77] = std::nanf("");
      const std::string key = "w" + std::to_string(r);
      host_frames[r].resize(codec->MaxEncodedBytes(n));
      device_frames[r].resize(codec->MaxEncodedBytes(n));
      auto h = host_ef.Encode(key, g, step, absl::MakeSpan(host_frames[r]));
      ASSERT_TRUE(h.ok()) << h.status();
      ASSERT_TRUE(device.Copy(d_grad, g.data(), n * 4, CopyKind::kHostToDevice, stream).ok());
      device.ResetCounters();
      auto d = device_ef.Encode(key, absl::MakeConstSpan(d_grad, n), step,
                                absl::MakeSpan(device_frames[r]), &call);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(device.launches(GetParam().encode_kernel), 1u);
      // Only the compact payload came back (the kernel's raw indices and
      // values, at most a frame's worth), never the dense gradient.
      EXPECT_LE(device.counters().device_to_host_bytes, codec->MaxEncodedBytes(n) + 64);
      EXPECT_LT(device.counters().device_to_host_bytes, n * sizeof(float));
      EXPECT_EQ(device.counters().host_to_device_bytes, 0u);
      ASSERT_EQ(h->frame_bytes, d->frame_bytes);
      EXPECT_EQ(h->selected, d->selected);
      EXPECT_EQ(h->nonfinite, d->nonfinite);
      host_frames[r].resize(h->frame_bytes);
      device_frames[r].resize(d->frame_bytes);
      ASSERT_EQ(host_frames[r], device_frames[r]) << "rank " << r << " step " << step;
      if (codec->spec().UsesErrorFeedback()) {
        const std::vector<float> want(host_ef.Residual(key).begin(), host_ef.Residual(key).end());
        EXPECT_TRUE(device.IsDeviceMemory(device_ef.Residual(key).data()));
        EXPECT_TRUE(SameBits(Download(device, device_ef.Residual(key).data(), n, stream), want));
      }
    }
    std::vector<absl::Span<const uint8_t>> frames(host_frames.begin(), host_frames.end());
    std::vector<float> want(n);
    ASSERT_TRUE(codec->DecodeAverage(frames, 3.0f, absl::MakeSpan(want)).ok());
    device.ResetCounters();
    ASSERT_TRUE(
        codec->DecodeAverage(frames, 3.0f, absl::MakeSpan(d_out, n), nullptr, nullptr, &call).ok());
    EXPECT_GT(device.counters().launches, 0u);
    EXPECT_EQ(device.counters().device_to_host_bytes, 0u);
    EXPECT_TRUE(SameBits(Download(device, d_out, n, stream), want)) << "step " << step;
    for (float v : want) ASSERT_EQ(std::isnan(v), step == 2) << "step " << step;
    // DecodeAccumulate onto the average.
    ASSERT_TRUE(codec->DecodeAccumulate(frames[1], absl::MakeSpan(want)).ok());
    ASSERT_TRUE(codec->DecodeAccumulate(frames[1], absl::MakeSpan(d_out, n), nullptr, &call).ok());
    EXPECT_TRUE(SameBits(Download(device, d_out, n, stream), want));
  }
  // A loss scale's change divides host and device residuals alike; a bad
  // divisor changes nothing.
  if (codec->spec().UsesErrorFeedback()) {
    const std::vector<float> before(host_ef.Residual("w0").begin(), host_ef.Residual("w0").end());
    for (const float bad : {0.0f, -1.0f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
      EXPECT_EQ(host_ef.DivideAll(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_EQ(device_ef.DivideAll(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
    }
    ASSERT_TRUE(host_ef.DivideAll(0.5f).ok());
    ASSERT_TRUE(device_ef.DivideAll(0.5f).ok());
    for (size_t r = 0; r < p; ++r) {
      const std::string key = "w" + std::to_string(r);
      const std::vector<float> want(host_ef.Residual(key).begin(), host_ef.Residual(key).end());
      EXPECT_TRUE(SameBits(Download(device, device_ef.Residual(key).data(), n, stream), want));
    }
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(host_ef.Residual("w0")[i], 2.0f * before[i]);
    ASSERT_TRUE(host_ef.DivideAll(2.0f).ok());
    ASSERT_TRUE(device_ef.DivideAll(2.0f).ok());
  }
  // Checkpoints: device residuals save in the host format, bit for bit.
  absl::StatusOr<std::string> saved = device_ef.Save();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, host_ef.SaveState());
  // Restored into a fresh object, the residual moves to the device at the
  // next encode and the frames stay equal.
  ErrorFeedback restored(*codec);
  ASSERT_TRUE(restored.RestoreState(*saved).ok());
  const std::vector<float> g = testing::SyntheticGradient(n, 99);
  std::vector<uint8_t> a(codec->MaxEncodedBytes(n)), b(codec->MaxEncodedBytes(n));
  ASSERT_TRUE(device.Copy(d_grad, g.data(), n * 4, CopyKind::kHostToDevice, stream).ok());
  auto ha = host_ef.Encode("w0", g, 7, absl::MakeSpan(a));
  auto db = restored.Encode("w0", absl::MakeConstSpan(d_grad, n), 7, absl::MakeSpan(b), &call);
  ASSERT_TRUE(ha.ok() && db.ok()) << db.status();
  EXPECT_EQ(a, b);
  // And restoring onto existing device residuals overwrites them in place.
  ASSERT_TRUE(device_ef.RestoreState(*saved).ok());
  EXPECT_EQ(device_ef.SaveState(), *saved);
  ASSERT_TRUE(device.WaitStream(stream, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_TRUE(device.violations().empty());
  device.Free(d_grad);
  device.Free(d_out);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, DeviceCodecTest,
    ::testing::Values(Case{"topk:ratio=0.01", "TopKCompress"},
                      Case{"topk:ratio=0.02,values=fp16,indices=varint", "TopKCompress"},
                      Case{"approx_topk:ratio=0.01", "ApproxTopKCompress"},
                      Case{"randomk:ratio=0.05,seed=3", "RandomKCompress"},
                      Case{"qsgd:bits=4,bucket=128", "QsgdCompress"},
                      Case{"sign:bucket=64", "SignCompress"}, Case{"fp16", "CastCompress"},
                      Case{"bf16", "CastCompress"}));

TEST(DeviceCodecErrors, MisuseIsRefusedNotCrashed) {
  HostDevice device;
  auto codec = *MakeCodec(*CompressionSpec::Parse("topk:ratio=0.1"));
  DeviceScratch scratch(device);
  const size_t n = 100;
  float* d = static_cast<float*>(*device.Allocate(n * 4));
  ASSERT_TRUE(device.FillZero(d, n * 4, nullptr).ok());
  std::vector<float> host(n), residual(n);
  std::vector<uint8_t> out(codec->MaxEncodedBytes(n));
  // A device gradient without a DeviceCall.
  EXPECT_EQ(codec->Encode(absl::MakeConstSpan(d, n), 0, {}, absl::MakeSpan(out)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A stream the device does not know.
  DeviceCall bad{&scratch, reinterpret_cast<kernels::cuda::Stream>(uintptr_t{0xbad0})};
  EXPECT_EQ(codec->Encode(absl::MakeConstSpan(d, n), 0, {}, absl::MakeSpan(out), nullptr, &bad)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A device gradient with a host residual.
  DeviceCall call{&scratch, nullptr};
  EXPECT_EQ(codec
                ->Encode(absl::MakeConstSpan(d, n), 0, absl::MakeSpan(residual),
                         absl::MakeSpan(out), nullptr, &call)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A frame in device memory.
  auto* d_frame = static_cast<uint8_t*>(*device.Allocate(out.size()));
  EXPECT_EQ(codec
                ->DecodeAccumulate(absl::MakeConstSpan(d_frame, out.size()), absl::MakeSpan(d, n),
                                   nullptr, &call)
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A key seen on the device, then on the host.
  ErrorFeedback ef(*codec);
  ASSERT_TRUE(ef.Encode("k", absl::MakeConstSpan(d, n), 0, absl::MakeSpan(out), &call).ok());
  EXPECT_EQ(ef.Encode("k", host, 1, absl::MakeSpan(out)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ef.GiveBack("k", {}, {}).code(), absl::StatusCode::kFailedPrecondition);
  device.Free(d);
  device.Free(d_frame);
}

}  // namespace
}  // namespace gradwire
