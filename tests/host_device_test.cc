// The host stand-in for a GPU (kernels/host_device.h): dispatch routes
// arena buffers to it, work runs in stream order only when waited for,
// and misuse (bad stream, mixed buffers, early reuse) is caught.
#include "gradwire/kernels/host_device.h"

#include <cstring>
#include <vector>

#include "absl/time/clock.h"
#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/dispatch.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace kernels {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

template <typename T>
T* Alloc(Device& d, size_t n) {
  return static_cast<T*>(*d.Allocate(n * sizeof(T)));
}

TEST(HostDeviceTest, ArenaIsDeviceMemoryToDispatch) {
  HostDevice device;
  float* d = Alloc<float>(device, 16);
  std::vector<float> h(16);
  Location where;
  ASSERT_TRUE(Locate(d, &where).ok());
  EXPECT_EQ(where, Location::kDevice);
  ASSERT_TRUE(Locate(d + 15, &where).ok());
  EXPECT_EQ(where, Location::kDevice);
  ASSERT_TRUE(Locate(h.data(), &where).ok());
  EXPECT_EQ(where, Location::kHost);
  device.Free(d);
}

// CheckDeviceRange: all of an allocation passes, a byte past its end (or
// a host byte) is refused by its offset, and so is a range that wraps.
TEST(HostDeviceTest, DeviceRangesEndWithTheirAllocation) {
  HostDevice device;
  float* d = Alloc<float>(device, 16);
  EXPECT_TRUE(device.CheckDeviceRange(d, 16 * sizeof(float)).ok());
  EXPECT_TRUE(device.CheckDeviceRange(d + 4, 12 * sizeof(float)).ok());
  EXPECT_TRUE(device.CheckDeviceRange(d, 0).ok());
  absl::Status s = device.CheckDeviceRange(d + 4, 13 * sizeof(float));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("byte 48 of the 52"), absl::string_view::npos) << s;
  std::vector<float> h(16);
  s = device.CheckDeviceRange(h.data(), 4);
  EXPECT_NE(s.message().find("byte 0 of the 4"), absl::string_view::npos) << s;
  EXPECT_EQ(device.CheckDeviceRange(d, SIZE_MAX).code(), absl::StatusCode::kInvalidArgument);
  device.Free(d);
  EXPECT_EQ(device.CheckDeviceRange(d, 4).code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostDeviceTest, DeviceCallsRunTheReferenceInStreamOrder) {
  HostDevice device;
  cuda::Stream stream = device.CreateStream();
  const size_t n = 1000;
  std::vector<float> grad(n), want_res(n, 0.0f);
  for (size_t i = 0; i < n; ++i) grad[i] = 0.001f * static_cast<float>(i) - 0.3f;
  std::vector<uint8_t> want(2 * n);
  cpu::CastCompress(grad.data(), want_res.data(), n, ValueFormat::kFp16, want.data(), nullptr);

  float* d_grad = Alloc<float>(device, n);
  float* d_res = Alloc<float>(device, n);
  uint8_t* d_out = Alloc<uint8_t>(device, 2 * n);
  auto* pinned = static_cast<uint8_t*>(*device.AllocatePinned(2 * n));
  ASSERT_TRUE(device.Copy(d_grad, grad.data(), 4 * n, CopyKind::kHostToDevice, stream).ok());
  ASSERT_TRUE(device.FillZero(d_res, 4 * n, stream).ok());
  ASSERT_TRUE(CastCompress(d_grad, d_res, n, ValueFormat::kFp16, d_out, nullptr, stream).ok());
  EXPECT_EQ(device.launches("CastCompress"), 1u);
  ASSERT_TRUE(device.Copy(pinned, d_out, 2 * n, CopyKind::kDeviceToHost, stream).ok());
  // Nothing has run yet: the pinned bytes are still uninitialized.
  EXPECT_NE(std::memcmp(pinned, want.data(), 2 * n), 0);
  ASSERT_TRUE(device.WaitStream(stream, Soon()).ok());
  EXPECT_EQ(std::memcmp(pinned, want.data(), 2 * n), 0);
  EXPECT_TRUE(device.violations().empty());
  device.FreePinned(pinned);
  device.Free(d_grad);
  device.Free(d_res);
  device.Free(d_out);
  device.DestroyStream(stream);
}

TEST(HostDeviceTest, RefusesUnknownStreamsMixedBuffersAndStrayCopies) {
  HostDevice device;
  float* d = Alloc<float>(device, 8);
  std::vector<float> h(8);
  cuda::Stream bogus = reinterpret_cast<cuda::Stream>(uintptr_t{0xdead0});
  EXPECT_EQ(device.CheckStream(bogus).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CastDecodeAccumulate(reinterpret_cast<uint8_t*>(h.data()), 8, ValueFormat::kFp32, d, nullptr)
          .code(),
      absl::StatusCode::kInvalidArgument);  // split between host and device
  EXPECT_EQ(CastDecodeAccumulate(reinterpret_cast<uint8_t*>(d), 2, ValueFormat::kFp32, d + 4, bogus)
                .code(),
            absl::StatusCode::kInvalidArgument);
  // One float past the allocation.
  EXPECT_FALSE(device.Copy(d + 1, h.data(), 32, CopyKind::kHostToDevice, nullptr).ok());
  EXPECT_FALSE(device.Copy(h.data(), h.data(), 4, CopyKind::kHostToDevice, nullptr).ok());
  device.Free(d);
}

TEST(HostDeviceTest, HostRewritingAPendingCopySourceIsAViolation) {
  HostDevice device;
  float* d = Alloc<float>(device, 4);
  std::vector<float> h = {1, 2, 3, 4};
  ASSERT_TRUE(device.Copy(d, h.data(), 16, CopyKind::kHostToDevice, nullptr).ok());
  h[0] = 9;  // too early: the copy has not run
  ASSERT_TRUE(device.WaitStream(nullptr, Soon()).ok());
  ASSERT_EQ(device.violations().size(), 1u);
  device.Free(d);
}

TEST(HostDeviceTest, RestoresTheRuntime) {
  { HostDevice device; }
  std::vector<float> h(4);
  Location where;
  ASSERT_TRUE(Locate(h.data(), &where).ok());
  EXPECT_EQ(where, Location::kHost);
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
