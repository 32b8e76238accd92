// Device: the memory, copies and stream ordering the device path needs,
// behind one interface with two implementations.
//
//   CudaDevice()      the CUDA runtime (kernels/cuda/device_memory.cu; in a
//                     build without CUDA every call answers Unavailable).
//                     Compiled for sm_90 in CI; ran on an H200 (2026-11-27).
//   HostDevice        (host_device.h) stands in for a GPU in CI: its
//                     "device memory" is a registered host arena that
//                     dispatch reports as kDevice, its "kernels" are the CPU
//                     references, run in stream order, and it can defer work
//                     until a wait, so a missing wait shows as wrong bytes.
//
// Where this lives: kernels/ (it uses nothing of gradwire's but kernels'
// own stream type), beside dispatch, which picks a kernel by where a buffer
// lives; lib/ allocates and copies only through this interface.
//
// Ordering model: everything is ordered by ONE stream (the caller's, e.g.
// PyTorch's current stream) and by events recorded on it. Copies and
// fills are asynchronous on that stream; the host waits for a point of the
// stream with WaitEvent / WaitStream, each with a deadline. Nothing here
// synchronizes the whole device. Host memory a pending copy reads or
// writes must not be touched by the host until the copy is waited for.
//
// Thread-safe: one Device serves every rank and thread of a process.
#ifndef GRADWIRE_KERNELS_DEVICE_H_
#define GRADWIRE_KERNELS_DEVICE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/kernels/cuda/stream.h"

namespace gradwire {
namespace kernels {

enum class CopyKind {
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,
};

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;

  // Device memory (cudaMalloc): uninitialized, 256-byte aligned. bytes = 0
  // gives nullptr. Free(nullptr) does nothing. Free must not race work
  // still using the memory: wait for its stream first.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;

  // Page-locked host memory (cudaHostAlloc), the staging end of every
  // device<->host copy on the compressed path.
  virtual absl::StatusOr<void*> AllocatePinned(size_t bytes) = 0;
  virtual void FreePinned(void* ptr) = 0;

  // Copies `bytes` bytes asynchronously on `stream` (cudaMemcpyAsync).
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind,
                            cuda::Stream stream) = 0;
  // Sets each of `bytes` bytes of device memory to `value` asynchronously
  // on `stream` (cudaMemsetAsync). 0xFF makes every float a NaN.
  virtual absl::Status FillBytes(void* dst, uint8_t value, size_t bytes, cuda::Stream stream) = 0;
  absl::Status FillZero(void* dst, size_t bytes, cuda::Stream stream) {
    return FillBytes(dst, 0, bytes, stream);
  }

  // Events (cudaEventDisableTiming): a point in one stream's work.
  virtual absl::StatusOr<cuda::Event> CreateEvent() = 0;
  virtual void DestroyEvent(cuda::Event event) = 0;
  // Marks the current end of `stream`'s work.
  virtual absl::Status RecordEvent(cuda::Event event, cuda::Stream stream) = 0;
  // Blocks the calling thread until the work before the recorded point is
  // done; DeadlineExceeded (the work goes on) if it is not by `deadline`.
  // An event never recorded is complete.
  virtual absl::Status WaitEvent(cuda::Event event, absl::Time deadline) = 0;

  // Whether `stream` can be used with this device: the host device knows
  // its streams and refuses others (InvalidArgument); the CUDA runtime
  // cannot check a raw handle and accepts any.
  virtual absl::Status CheckStream(cuda::Stream stream) const = 0;

  // Whether every byte of [ptr, ptr + bytes) lies in device memory: one
  // allocation, or several that adjoin (virtual-memory allocations mapped
  // segment by segment into one range, as PyTorch's expandable segments
  // are: the driver names each segment's range, not the whole).
  // InvalidArgument naming the first byte that does not, so that a wrong
  // length from a caller is an error rather than kernels reading and
  // writing past its buffer (which on a GPU poisons the context). The
  // host device knows its allocations; the CUDA runtime asks the driver
  // (cuMemGetAddressRange) and accepts what the driver cannot answer for
  // (an entry point it lacks, an error other than "not device memory").
  // bytes == 0: OK.
  virtual absl::Status CheckDeviceRange(const void* ptr, size_t bytes) const = 0;

  // Waits until everything issued on `stream` so far is done: an event
  // recorded now and waited for (never a device-wide synchronize).
  absl::Status WaitStream(cuda::Stream stream, absl::Time deadline);
};

// The process's CUDA device (the current device of the calling thread):
// always the same object. Built without CUDA, or with no GPU, its calls
// answer Unavailable.
Device& CudaDevice();

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_DEVICE_H_
