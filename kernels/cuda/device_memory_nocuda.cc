// kernels/device.h's CudaDevice in a build without CUDA: every call
// answers Unavailable (the host device, host_device.h, stands in for tests).
#include "gradwire/kernels/device.h"

namespace gradwire {
namespace kernels {
namespace {

absl::Status NoCuda() { return absl::UnavailableError("gradwire was built without CUDA"); }

class NoCudaDevice final : public Device {
 public:
  std::string name() const override { return "cuda (not built)"; }
  absl::StatusOr<void*> Allocate(size_t) override { return NoCuda(); }
  void Free(void*) override {}
  absl::StatusOr<void*> AllocatePinned(size_t) override { return NoCuda(); }
  void FreePinned(void*) override {}
  absl::Status Copy(void*, const void*, size_t, CopyKind, cuda::Stream) override {
    return NoCuda();
  }
  absl::Status FillBytes(void*, uint8_t, size_t, cuda::Stream) override { return NoCuda(); }
  absl::StatusOr<cuda::Event> CreateEvent() override { return NoCuda(); }
  void DestroyEvent(cuda::Event) override {}
  absl::Status RecordEvent(cuda::Event, cuda::Stream) override { return NoCuda(); }
  absl::Status WaitEvent(cuda::Event, absl::Time) override { return NoCuda(); }
  absl::Status CheckStream(cuda::Stream) const override { return NoCuda(); }
  absl::Status CheckDeviceRange(const void*, size_t) const override { return NoCuda(); }
};

}  // namespace

Device& CudaDevice() {
  static NoCudaDevice* device = new NoCudaDevice();
  return *device;
}

}  // namespace kernels
}  // namespace gradwire
