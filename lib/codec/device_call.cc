#include "gradwire/lib/codec/device_call.h"

#include "gradwire/base/status_macros.h"

namespace gradwire {

DeviceScratch::~DeviceScratch() {
  device_.Free(device_bytes_);
  device_.FreePinned(pinned_);
}

namespace {

// Grows *buffer (of *capacity bytes) to `bytes` with allocate / release,
// waiting for `stream` before releasing a buffer work may still use.
template <typename Allocate, typename Release>
absl::StatusOr<uint8_t*> Grow(uint8_t** buffer, size_t* capacity, size_t bytes,
                              kernels::Device& device, kernels::cuda::Stream stream,
                              absl::Time deadline, Allocate allocate, Release release) {
  if (bytes > *capacity) {
    if (*buffer != nullptr) {
      GRADWIRE_RETURN_IF_ERROR(device.WaitStream(stream, deadline));
      release(*buffer);
      *buffer = nullptr;
      *capacity = 0;
    }
    GRADWIRE_ASSIGN_OR_RETURN(void* p, allocate(bytes));
    *buffer = static_cast<uint8_t*>(p);
    *capacity = bytes;
  }
  return *buffer;
}

}  // namespace

absl::StatusOr<uint8_t*> DeviceScratch::DeviceBytes(size_t bytes, kernels::cuda::Stream stream,
                                                    absl::Time deadline) {
  return Grow(
      &device_bytes_, &device_capacity_, bytes, device_, stream, deadline,
      [this](size_t b) { return device_.Allocate(b); }, [this](void* p) { device_.Free(p); });
}

absl::StatusOr<uint8_t*> DeviceScratch::PinnedBytes(size_t bytes, kernels::cuda::Stream stream,
                                                    absl::Time deadline) {
  return Grow(
      &pinned_, &pinned_capacity_, bytes, device_, stream, deadline,
      [this](size_t b) { return device_.AllocatePinned(b); },
      [this](void* p) { device_.FreePinned(p); });
}

}  // namespace gradwire
