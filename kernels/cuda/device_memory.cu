// kernels/device.h's CudaDevice on the CUDA runtime. NOT YET RUN ON
// HARDWARE: compiled for sm_90 in CI, exercised only by tools/gpu.
#include <cuda_runtime.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gradwire/kernels/device.h"

namespace gradwire {
namespace kernels {
namespace {

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
}

#define GRADWIRE_DEVICE_RETURN_IF_ERROR(expr)                \
  do {                                                       \
    absl::Status device_status_ = CudaStatus((expr), #expr); \
    if (!device_status_.ok()) return device_status_;         \
  } while (0)

cudaMemcpyKind ToCuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    default:
      return cudaMemcpyDeviceToDevice;
  }
}

class Cuda final : public Device {
 public:
  std::string name() const override { return "cuda"; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    return p;
  }
  void Free(void* ptr) override {
    if (ptr != nullptr) cudaFree(ptr);
  }
  absl::StatusOr<void*> AllocatePinned(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    return p;
  }
  void FreePinned(void* ptr) override {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
  absl::Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind,
                    cuda::Stream stream) override {
    if (bytes == 0) return absl::OkStatus();
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, ToCuda(kind), stream));
    return absl::OkStatus();
  }
  absl::Status FillBytes(void* dst, uint8_t value, size_t bytes, cuda::Stream stream) override {
    if (bytes == 0) return absl::OkStatus();
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaMemsetAsync(dst, value, bytes, stream));
    return absl::OkStatus();
  }
  absl::StatusOr<cuda::Event> CreateEvent() override {
    cudaEvent_t e = nullptr;
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void DestroyEvent(cuda::Event event) override {
    if (event != nullptr) cudaEventDestroy(event);
  }
  absl::Status RecordEvent(cuda::Event event, cuda::Stream stream) override {
    GRADWIRE_DEVICE_RETURN_IF_ERROR(cudaEventRecord(event, stream));
    return absl::OkStatus();
  }
  // Polls: cudaEventSynchronize has no deadline.
  absl::Status WaitEvent(cuda::Event event, absl::Time deadline) override {
    for (int spins = 0;; ++spins) {
      const cudaError_t err = cudaEventQuery(event);
      if (err == cudaSuccess) return absl::OkStatus();
      if (err != cudaErrorNotReady) return CudaStatus(err, "cudaEventQuery");
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError("device work not done by the deadline");
      }
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  absl::Status CheckStream(cuda::Stream) const override { return absl::OkStatus(); }

  // Allocation by allocation while they adjoin, from the driver's
  // cuMemGetAddressRange (reached through the runtime: no link to libcuda).
  absl::Status CheckDeviceRange(const void* ptr, size_t bytes) const override {
    const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
    uintptr_t end = 0;
    if (__builtin_add_overflow(at, bytes, &end)) {
      return absl::InvalidArgumentError("device range runs past the end of the address space");
    }
    static const AddressRangeFn range = LoadAddressRange();
    if (range == nullptr) return absl::OkStatus();  // cannot tell: trusted
    for (uintptr_t cursor = at; cursor < end;) {
      unsigned long long base = 0;  // CUdeviceptr
      size_t size = 0;
      const int err = range(&base, &size, cursor);
      if (err == kCudaErrorInvalidValue || err == kCudaErrorNotFound) {
        return absl::InvalidArgumentError(
            std::string("byte ") + std::to_string(cursor - at) + " of the " +
            std::to_string(bytes) +
            " from the device address is not in device memory (the buffer is shorter than "
            "its length)");
      }
      if (err != 0 || base + size <= cursor) return absl::OkStatus();  // cannot tell
      cursor = base + size;
    }
    return absl::OkStatus();
  }

 private:
  // cuMemGetAddressRange's type and the two CUresult values that mean "not
  // in an allocation" (cuda.h: CUDA_ERROR_INVALID_VALUE, _NOT_FOUND).
  using AddressRangeFn = int (*)(unsigned long long*, size_t*, unsigned long long);
  static constexpr int kCudaErrorInvalidValue = 1;
  static constexpr int kCudaErrorNotFound = 500;

  static AddressRangeFn LoadAddressRange() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // not sticky; leave no error behind
      return nullptr;
    }
    return reinterpret_cast<AddressRangeFn>(fn);
  }
};

}  // namespace

Device& CudaDevice() {
  static Cuda* device = new Cuda();
  return *device;
}

}  // namespace kernels
}  // namespace gradwire
