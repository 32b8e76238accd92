#include "gradwire/kernels/host_device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace kernels {
namespace {

std::atomic<HostDevice*> g_active{nullptr};

int OneDevice() { return 1; }

absl::Status ActiveLocate(const void* ptr, Location* where) {
  HostDevice* d = g_active.load(std::memory_order_acquire);
  if (d == nullptr) {
    *where = Location::kHost;
    return absl::OkStatus();
  }
  return d->Locate(ptr, where);
}

absl::Status ActiveLaunch(cuda::Stream stream, const char* who, std::function<void()> work) {
  HostDevice* d = g_active.load(std::memory_order_acquire);
  if (d == nullptr) return absl::FailedPreconditionError("no host device is active");
  return d->Launch(stream, who, std::move(work));
}

constexpr dispatch_internal::Runtime kHostRuntime = {OneDevice, ActiveLocate, ActiveLaunch};

constexpr size_t kAlign = 256;

void* AlignedAlloc(size_t bytes, int poison) {
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p != nullptr) std::memset(p, poison, rounded);
  return p;
}

// The allocation in `ranges` holding [p, p + bytes), if any.
bool Inside(const std::map<uintptr_t, size_t>& ranges, const void* p, size_t bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = ranges.upper_bound(at);
  if (it == ranges.begin()) return false;
  --it;
  return at >= it->first && at - it->first <= it->second && bytes <= it->second - (at - it->first);
}

}  // namespace

HostDevice::HostDevice(Options options) : options_(options) {
  HostDevice* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this)) std::abort();  // one at a time
  queues_[nullptr];                                                     // the default stream
  previous_runtime_ = dispatch_internal::SetRuntimeForTesting(&kHostRuntime);
}

HostDevice::~HostDevice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RunAll();
    for (auto& [p, bytes] : device_) std::free(reinterpret_cast<void*>(p));
    for (auto& [p, bytes] : pinned_) std::free(reinterpret_cast<void*>(p));
  }
  dispatch_internal::SetRuntimeForTesting(previous_runtime_);
  g_active.store(nullptr, std::memory_order_release);
}

absl::StatusOr<void*> HostDevice::Allocate(size_t bytes) {
  return AllocateIn(device_, bytes, 0xCD);
}

void HostDevice::Free(void* ptr) { FreeIn(device_, ptr, "Free"); }

absl::StatusOr<void*> HostDevice::AllocatePinned(size_t bytes) {
  return AllocateIn(pinned_, bytes, 0xA5);
}

void HostDevice::FreePinned(void* ptr) { FreeIn(pinned_, ptr, "FreePinned"); }

absl::StatusOr<void*> HostDevice::AllocateIn(std::map<uintptr_t, size_t>& ranges, size_t bytes,
                                             int poison) {
  if (bytes == 0) return nullptr;
  void* p = AlignedAlloc(bytes, poison);
  if (p == nullptr) return absl::ResourceExhaustedError("host device: out of memory");
  std::lock_guard<std::mutex> lock(mu_);
  ranges[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void HostDevice::FreeIn(std::map<uintptr_t, size_t>& ranges, void* ptr, const char* who) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  RunAll();
  if (ranges.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    violations_.push_back(absl::StrCat(who, " of memory this device did not allocate"));
    return;
  }
  std::free(ptr);
}

absl::Status HostDevice::CheckRange(const void* ptr, size_t bytes, bool device,
                                    const char* what) const {
  const bool in_device = Inside(device_, ptr, bytes);
  if (device && !in_device) {
    return absl::InvalidArgumentError(absl::StrCat("host device: ", what, " (", bytes,
                                                   " bytes) is not inside one device allocation"));
  }
  if (!device && (in_device || Inside(device_, ptr, 1))) {
    return absl::InvalidArgumentError(absl::StrCat("host device: ", what, " is device memory"));
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Copy(void* dst, const void* src, size_t bytes, CopyKind kind,
                              cuda::Stream stream) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckStreamLocked(stream); !s.ok()) return s;
  const bool dst_device = kind != CopyKind::kDeviceToHost;
  const bool src_device = kind != CopyKind::kHostToDevice;
  if (absl::Status s = CheckRange(dst, bytes, dst_device, "copy destination"); !s.ok()) return s;
  if (absl::Status s = CheckRange(src, bytes, src_device, "copy source"); !s.ok()) return s;
  switch (kind) {
    case CopyKind::kHostToDevice: {
      counters_.host_to_device_bytes += bytes;
      ++counters_.host_to_device_copies;
      // What the host holds now: if it changes before the copy runs, the
      // host reused the source too early.
      std::vector<uint8_t> issued(static_cast<const uint8_t*>(src),
                                  static_cast<const uint8_t*>(src) + bytes);
      Enqueue(stream, [this, dst, src, bytes, issued = std::move(issued)] {
        if (std::memcmp(issued.data(), src, bytes) != 0) {
          violations_.push_back(absl::StrCat(
              "host rewrote the ", bytes, "-byte source of a host-to-device copy before it ran"));
        }
        std::memcpy(dst, src, bytes);
      });
      break;
    }
    case CopyKind::kDeviceToHost:
      counters_.device_to_host_bytes += bytes;
      ++counters_.device_to_host_copies;
      Enqueue(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
      break;
    case CopyKind::kDeviceToDevice:
      counters_.device_to_device_bytes += bytes;
      Enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
      break;
  }
  return absl::OkStatus();
}

absl::Status HostDevice::FillBytes(void* dst, uint8_t value, size_t bytes, cuda::Stream stream) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckStreamLocked(stream); !s.ok()) return s;
  if (absl::Status s = CheckRange(dst, bytes, true, "fill destination"); !s.ok()) return s;
  Enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return absl::OkStatus();
}

absl::StatusOr<cuda::Event> HostDevice::CreateEvent() {
  std::lock_guard<std::mutex> lock(mu_);
  cuda::Event e = reinterpret_cast<cuda::Event>(next_handle_);
  next_handle_ += 16;
  events_[e] = EventState{};
  return e;
}

void HostDevice::DestroyEvent(cuda::Event event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.erase(event);
}

absl::Status HostDevice::RecordEvent(cuda::Event event, cuda::Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckStreamLocked(stream); !s.ok()) return s;
  auto it = events_.find(event);
  if (it == events_.end()) return absl::InvalidArgumentError("host device: unknown event");
  it->second = EventState{stream, queues_[stream].issued};
  return absl::OkStatus();
}

absl::Status HostDevice::WaitEvent(cuda::Event event, absl::Time /*deadline: work runs here*/) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(event);
  if (it == events_.end()) return absl::InvalidArgumentError("host device: unknown event");
  auto q = queues_.find(it->second.stream);
  if (q != queues_.end()) RunUntil(q->second, it->second.at);
  return absl::OkStatus();
}

absl::Status HostDevice::CheckStream(cuda::Stream stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckStreamLocked(stream);
}

absl::Status HostDevice::CheckStreamLocked(cuda::Stream stream) const {
  if (queues_.count(stream) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("stream ", reinterpret_cast<uintptr_t>(stream),
                                                   " was not created by this device"));
  }
  return absl::OkStatus();
}

cuda::Stream HostDevice::CreateStream() {
  std::lock_guard<std::mutex> lock(mu_);
  cuda::Stream s = reinterpret_cast<cuda::Stream>(next_handle_);
  next_handle_ += 16;
  queues_[s];
  return s;
}

void HostDevice::DestroyStream(cuda::Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(stream);
  if (it == queues_.end() || stream == nullptr) return;
  RunUntil(it->second, it->second.issued);
  queues_.erase(it);
}

bool HostDevice::IsDeviceMemory(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Inside(device_, ptr, 1);
}

HostDevice::Counters HostDevice::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

uint64_t HostDevice::launches(absl::string_view who) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = launches_.find(who);
  return it == launches_.end() ? 0 : it->second;
}

void HostDevice::ResetCounters() {
  std::lock_guard<std::mutex> lock(mu_);
  counters_ = Counters();
  launches_.clear();
}

std::vector<std::string> HostDevice::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

absl::Status HostDevice::Launch(cuda::Stream stream, const char* who, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckStreamLocked(stream); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", s.message()));
  }
  ++counters_.launches;
  ++launches_[who];
  Enqueue(stream, std::move(work));
  return absl::OkStatus();
}

absl::Status HostDevice::CheckDeviceRange(const void* ptr, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
  uintptr_t end = 0;
  if (__builtin_add_overflow(at, bytes, &end)) {
    return absl::InvalidArgumentError("device range runs past the end of the address space");
  }
  // Allocation by allocation while they adjoin.
  for (uintptr_t cursor = at; cursor < end;) {
    auto it = device_.upper_bound(cursor);
    if (it == device_.begin() || cursor - std::prev(it)->first >= std::prev(it)->second) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte ", cursor - at, " of the ", bytes,
                       " from the device address is not in device "
                       "memory (the buffer is shorter than its length)"));
    }
    --it;
    cursor = it->first + it->second;
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Locate(const void* ptr, Location* where) const {
  std::lock_guard<std::mutex> lock(mu_);
  *where = Inside(device_, ptr, 1) ? Location::kDevice : Location::kHost;
  return absl::OkStatus();
}

void HostDevice::Enqueue(cuda::Stream stream, std::function<void()> work) {
  Queue& q = queues_[stream];
  q.pending.push_back(std::move(work));
  ++q.issued;
  if (!options_.defer) RunUntil(q, q.issued);
}

void HostDevice::RunUntil(Queue& q, uint64_t until) {
  while (q.done < until && !q.pending.empty()) {
    std::function<void()> work = std::move(q.pending.front());
    q.pending.pop_front();
    ++q.done;
    work();
  }
}

void HostDevice::RunAll() {
  for (auto& [stream, q] : queues_) RunUntil(q, q.issued);
}

}  // namespace kernels
}  // namespace gradwire
