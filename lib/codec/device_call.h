// What a codec call on device buffers needs besides the buffers: the
// device, the caller's stream, and caller-owned working memory.
//
// CI runs the device path on the host stand-in (kernels/host_device.h); the
// CUDA implementation ran on an H200 on 2026-11-27 (docs/device_path.md).
//
// A codec call runs on the device when its gradient (Encode) or dense
// output (DecodeAccumulate, DecodeAverage) is device memory (kernels/
// dispatch.h Locate); frames are always host bytes. On the device path:
//   Encode      runs the fused compress kernel on `stream`, copies only the
//               compact outputs (indices + values, or scales + codes) to
//               pinned memory, waits for them (an event on `stream`, never
//               a device-wide synchronize) and writes the frame on the
//               host. The residual, device memory too, is updated on the
//               device. Returns with the frame complete.
//   DecodeAccumulate / DecodeAverage
//               validate every frame on the host first (nothing is
//               written on refusal), copy the frames' payloads through
//               pinned memory to the device, and wait only until those
//               copies are done: the caller may reuse the frames on
//               return, while the decode itself runs on asynchronously on
//               `stream` (order later work after it on the same stream).
// The results are the CPU path's bit for bit (the kernels' contract).
#ifndef GRADWIRE_LIB_CODEC_DEVICE_CALL_H_
#define GRADWIRE_LIB_CODEC_DEVICE_CALL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/kernels/device.h"

namespace gradwire {

// Device memory and pinned host memory for codec calls on one stream,
// grown on demand to the largest request and never shrunk. Growing frees
// the old buffer only after waiting for `stream` (work may still use it).
// Thread-compatible. Destroying it frees its memory: wait for the stream
// first if work may still use it.
class DeviceScratch {
 public:
  explicit DeviceScratch(kernels::Device& device) : device_(device) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  kernels::Device& device() const { return device_; }

  absl::StatusOr<uint8_t*> DeviceBytes(size_t bytes, kernels::cuda::Stream stream,
                                       absl::Time deadline);
  absl::StatusOr<uint8_t*> PinnedBytes(size_t bytes, kernels::cuda::Stream stream,
                                       absl::Time deadline);

 private:
  kernels::Device& device_;
  uint8_t* device_bytes_ = nullptr;
  size_t device_capacity_ = 0;
  uint8_t* pinned_ = nullptr;
  size_t pinned_capacity_ = 0;
};

struct DeviceCall {
  DeviceScratch* scratch = nullptr;  // required; its device() is the call's device
  kernels::cuda::Stream stream = nullptr;
  absl::Duration timeout = absl::Seconds(60);  // bounds each wait for the stream
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_DEVICE_CALL_H_
