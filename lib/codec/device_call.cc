#include "gradwire/lib/codec/device_call.h"

#include "gradwire/base/status_macros.h"

namespace gradwire {

DeviceScratch::~DeviceScratch() {
  device_.Free(device_bytes_);
  device_.FreePinned(pinned_);
}

absl::StatusOr<uint8_t*> DeviceScratch::DeviceBytes(size_t bytes, kernels::cuda::Stream stream,
                                                    absl::Time deadline) {
  if (bytes > device_capacity_) {
    if (device_bytes_ != nullptr) {
      GRADWIRE_RETURN_IF_ERROR(device_.WaitStream(stream, deadline));
      device_.Free(device_bytes_);
      device_bytes_ = nullptr;
      device_capacity_ = 0;
    }
    GRADWIRE_ASSIGN_OR_RETURN(void* p, device_.Allocate(bytes));
    device_bytes_ = static_cast<uint8_t*>(p);
    device_capacity_ = bytes;
  }
  return device_bytes_;
}

absl::StatusOr<uint8_t*> DeviceScratch::PinnedBytes(size_t bytes, kernels::cuda::Stream stream,
                                                    absl::Time deadline) {
  if (bytes > pinned_capacity_) {
    if (pinned_ != nullptr) {
      GRADWIRE_RETURN_IF_ERROR(device_.WaitStream(stream, deadline));
      device_.FreePinned(pinned_);
      pinned_ = nullptr;
      pinned_capacity_ = 0;
    }
    GRADWIRE_ASSIGN_OR_RETURN(void* p, device_.AllocatePinned(bytes));
    pinned_ = static_cast<uint8_t*>(p);
    pinned_capacity_ = bytes;
  }
  return pinned_;
}

}  // namespace gradwire
