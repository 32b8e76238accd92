// HostDevice: a host stand-in for a GPU, so that every test of the device
// path runs in CI, where there is no GPU.
//
// What it imitates, and how:
//   - Device memory is host memory from a registered arena. While a
//     HostDevice exists it is dispatch's runtime (dispatch.h,
//     SetRuntimeForTesting): Locate reports kDevice for arena pointers and
//     kHost for everything else, so dispatch routes a call on arena
//     buffers to the device side and refuses one that mixes arena and
//     host buffers, exactly as with CUDA memory.
//   - "Kernels" are the CPU references (bit for bit the CUDA kernels'
//     contract), handed over by dispatch and run in stream order.
//   - Asynchrony: with Options::defer (the default) nothing issued on a
//     stream runs until the host waits for it (WaitEvent / WaitStream) or
//     frees memory. Code that reads a device-to-host copy's destination
//     before waiting sees the uninitialized bytes (0xA5 pinned, 0xCD
//     device) instead of the data, so a missing wait shows as wrong
//     frames; a host-to-device copy whose source bytes the host rewrote
//     before the copy ran is recorded as an ordering violation.
//   - Copies are checked: each end must be inside one allocation of the
//     right kind (device for the device end, not device for the host end).
//   - Streams are handles this object created (CreateStream) or the
//     default stream (nullptr); any other stream is InvalidArgument.
//
// It counts launches per kernel and copied bytes per direction, so tests
// can check which implementation ran and that no dense buffer crossed.
//
// One HostDevice at a time per process (it installs itself in dispatch,
// and restores the previous runtime when destroyed). Thread-safe: ranks
// on threads share it like ranks sharing one GPU, each on its own stream.
// Work runs under one lock, so it is not a performance model.
#ifndef GRADWIRE_KERNELS_HOST_DEVICE_H_
#define GRADWIRE_KERNELS_HOST_DEVICE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gradwire/kernels/device.h"
#include "gradwire/kernels/dispatch.h"

namespace gradwire {
namespace kernels {

class HostDevice final : public Device {
 public:
  struct Options {
    // Issued work waits for a wait (see above); false: runs at once.
    bool defer = true;
  };
  struct Counters {
    uint64_t launches = 0;
    uint64_t host_to_device_bytes = 0, device_to_host_bytes = 0, device_to_device_bytes = 0;
    uint64_t host_to_device_copies = 0, device_to_host_copies = 0;
  };

  HostDevice() : HostDevice(Options()) {}
  explicit HostDevice(Options options);
  ~HostDevice() override;
  HostDevice(const HostDevice&) = delete;
  HostDevice& operator=(const HostDevice&) = delete;

  std::string name() const override { return "host stand-in"; }
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;  // runs all pending work first
  absl::StatusOr<void*> AllocatePinned(size_t bytes) override;
  void FreePinned(void* ptr) override;  // runs all pending work first
  absl::Status Copy(void* dst, const void* src, size_t bytes, CopyKind kind,
                    cuda::Stream stream) override;
  absl::Status FillBytes(void* dst, uint8_t value, size_t bytes, cuda::Stream stream) override;
  absl::StatusOr<cuda::Event> CreateEvent() override;
  void DestroyEvent(cuda::Event event) override;
  absl::Status RecordEvent(cuda::Event event, cuda::Stream stream) override;
  absl::Status WaitEvent(cuda::Event event, absl::Time deadline) override;
  absl::Status CheckStream(cuda::Stream stream) const override;
  absl::Status CheckDeviceRange(const void* ptr, size_t bytes) const override;

  // A new stream (never nullptr); DestroyStream runs its pending work.
  cuda::Stream CreateStream();
  void DestroyStream(cuda::Stream stream);

  // Whether `ptr` is inside a live device allocation.
  bool IsDeviceMemory(const void* ptr) const;

  Counters counters() const;
  // Launches of the dispatch entry point `who` ("TopKCompress", ...).
  uint64_t launches(absl::string_view who) const;
  void ResetCounters();
  // Ordering violations seen so far, described.
  std::vector<std::string> violations() const;

  // dispatch's runtime hooks (internal).
  absl::Status Launch(cuda::Stream stream, const char* who, std::function<void()> work);
  absl::Status Locate(const void* ptr, Location* where) const;

 private:
  struct Queue {
    std::deque<std::function<void()>> pending;
    uint64_t issued = 0;  // work items issued so far
    uint64_t done = 0;    // of which run
  };
  struct EventState {
    cuda::Stream stream = nullptr;
    uint64_t at = 0;  // the stream's `issued` when recorded
  };

  absl::StatusOr<void*> AllocateIn(std::map<uintptr_t, size_t>& ranges, size_t bytes, int poison);
  void FreeIn(std::map<uintptr_t, size_t>& ranges, void* ptr, const char* who);

  // All under mu_.
  absl::Status CheckStreamLocked(cuda::Stream stream) const;
  absl::Status CheckRange(const void* ptr, size_t bytes, bool device, const char* what) const;
  void Enqueue(cuda::Stream stream, std::function<void()> work);
  void RunUntil(Queue& q, uint64_t until);
  void RunAll();

  const Options options_;
  const dispatch_internal::Runtime* previous_runtime_ = nullptr;
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> device_;  // begin -> bytes
  std::map<uintptr_t, size_t> pinned_;
  std::map<cuda::Stream, Queue> queues_;  // nullptr: the default stream
  std::map<cuda::Event, EventState> events_;
  uintptr_t next_handle_ = 0x1000;
  Counters counters_;
  std::map<std::string, uint64_t, std::less<>> launches_;
  std::vector<std::string> violations_;
};

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_HOST_DEVICE_H_
