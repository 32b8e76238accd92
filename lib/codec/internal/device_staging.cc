#include "gradwire/lib/codec/internal/device_staging.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"

namespace gradwire {
namespace codec_internal {
namespace {

uint64_t Aligned(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// Lays `spans` out one after another from *total on, each at a 256-byte
// boundary: returns their offsets and leaves *total past the last.
template <typename Span>
absl::InlinedVector<uint64_t, 16> Layout(absl::Span<const Span> spans, uint64_t* total) {
  absl::InlinedVector<uint64_t, 16> at;
  for (const Span& s : spans) {
    at.push_back(*total);
    *total += Aligned(s.size());
  }
  return at;
}

// The scratch one staged kernel call uses, from the call's DeviceScratch
// on its stream: device bytes and pinned host bytes.
struct Staging {
  uint8_t* device;
  uint8_t* pinned;
};

absl::StatusOr<Staging> Reserve(const DeviceCall& call, uint64_t device_bytes,
                                uint64_t pinned_bytes, absl::Time deadline) {
  GRADWIRE_ASSIGN_OR_RETURN(uint8_t * d,
                            call.scratch->DeviceBytes(device_bytes, call.stream, deadline));
  GRADWIRE_ASSIGN_OR_RETURN(uint8_t * pinned,
                            call.scratch->PinnedBytes(pinned_bytes, call.stream, deadline));
  return Staging{d, pinned};
}

}  // namespace

absl::StatusOr<const DeviceCall*> WhereToRun(const char* who, const void* buffer, const void* frame,
                                             const DeviceCall* call) {
  kernels::Location where;
  GRADWIRE_RETURN_IF_ERROR(kernels::Locate(buffer, &where));
  if (frame != nullptr) {
    kernels::Location frame_at;
    GRADWIRE_RETURN_IF_ERROR(kernels::Locate(frame, &frame_at));
    if (frame_at == kernels::Location::kDevice) {
      return absl::InvalidArgumentError(std::string(who) +
                                        ": frames are host bytes, this one is in device memory");
    }
  }
  if (where == kernels::Location::kHost) return nullptr;
  if (call == nullptr || call->scratch == nullptr) {
    return absl::InvalidArgumentError(std::string(who) +
                                      ": the buffer is device memory: pass a DeviceCall "
                                      "(device scratch and stream)");
  }
  if (absl::Status s = call->scratch->device().CheckStream(call->stream); !s.ok()) {
    return absl::InvalidArgumentError(std::string(who) + ": " + std::string(s.message()));
  }
  return call;
}

absl::Status RunEncodeKernel(const DeviceCall* device, absl::Span<const absl::Span<uint8_t>> outs,
                             void* host_temp, uint64_t temp_bytes, kernels::FusedStats* fs,
                             EncodeKernel kernel) {
  absl::InlinedVector<uint8_t*, 4> ptrs;
  if (device == nullptr) {
    for (absl::Span<uint8_t> o : outs) ptrs.push_back(o.data());
    return kernel(ptrs, host_temp, fs, nullptr);
  }
  // Device layout: stats, each output, temp. Pinned: stats, each output.
  uint64_t total = Aligned(sizeof(kernels::FusedStats));
  const absl::InlinedVector<uint64_t, 16> at = Layout(outs, &total);
  const uint64_t back = total;  // bytes that come back
  const uint64_t temp_at = total;
  total += Aligned(temp_bytes);
  const absl::Time deadline = absl::Now() + device->timeout;
  kernels::Device& dev = device->scratch->device();
  GRADWIRE_ASSIGN_OR_RETURN(const Staging staged, Reserve(*device, total, back, deadline));
  uint8_t* const d = staged.device;
  uint8_t* const pinned = staged.pinned;
  for (size_t i = 0; i < outs.size(); ++i)
    ptrs.push_back(outs[i].size() == 0 ? nullptr : d + at[i]);
  auto* stats = reinterpret_cast<kernels::FusedStats*>(d);
  GRADWIRE_RETURN_IF_ERROR(
      kernel(ptrs, temp_bytes > 0 ? d + temp_at : nullptr, stats, device->stream));
  GRADWIRE_RETURN_IF_ERROR(dev.Copy(pinned, d, sizeof(kernels::FusedStats),
                                    kernels::CopyKind::kDeviceToHost, device->stream));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].data() == nullptr) continue;  // device-only
    GRADWIRE_RETURN_IF_ERROR(dev.Copy(pinned + at[i], d + at[i], outs[i].size(),
                                      kernels::CopyKind::kDeviceToHost, device->stream));
  }
  GRADWIRE_RETURN_IF_ERROR(dev.WaitStream(device->stream, deadline));
  std::memcpy(fs, pinned, sizeof(kernels::FusedStats));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].data() != nullptr && !outs[i].empty()) {
      std::memcpy(outs[i].data(), pinned + at[i], outs[i].size());
    }
  }
  return absl::OkStatus();
}

absl::Status RunDecodeKernel(const DeviceCall* device,
                             absl::Span<const absl::Span<const uint8_t>> ins, DecodeKernel kernel) {
  absl::InlinedVector<const uint8_t*, 16> ptrs;
  if (device == nullptr) {
    for (absl::Span<const uint8_t> in : ins) ptrs.push_back(in.data());
    return kernel(ptrs, nullptr);
  }
  uint64_t total = 0;
  const absl::InlinedVector<uint64_t, 16> at = Layout(ins, &total);
  const absl::Time deadline = absl::Now() + device->timeout;
  kernels::Device& dev = device->scratch->device();
  GRADWIRE_ASSIGN_OR_RETURN(const Staging staged, Reserve(*device, total, total, deadline));
  uint8_t* const d = staged.device;
  uint8_t* const pinned = staged.pinned;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i].empty()) std::memcpy(pinned + at[i], ins[i].data(), ins[i].size());
  }
  // One copy for everything: the staged inputs are contiguous.
  GRADWIRE_RETURN_IF_ERROR(
      dev.Copy(d, pinned, total, kernels::CopyKind::kHostToDevice, device->stream));
  // The pinned bytes (and the caller's frames) are free once the copy is
  // done; the kernel then runs on asynchronously.
  GRADWIRE_RETURN_IF_ERROR(dev.WaitStream(device->stream, deadline));
  for (size_t i = 0; i < ins.size(); ++i) ptrs.push_back(ins[i].empty() ? nullptr : d + at[i]);
  return kernel(ptrs, device->stream);
}

absl::Status FillZero(const DeviceCall* device, absl::Span<float> out) {
  if (device == nullptr) {
    std::fill(out.begin(), out.end(), 0.0f);
    return absl::OkStatus();
  }
  return device->scratch->device().FillZero(out.data(), out.size() * sizeof(float), device->stream);
}

absl::Status FillNaN(const DeviceCall* device, absl::Span<float> out) {
  if (device == nullptr) {
    std::memset(out.data(), 0xFF, out.size() * sizeof(float));
    return absl::OkStatus();
  }
  return device->scratch->device().FillBytes(out.data(), 0xFF, out.size() * sizeof(float),
                                             device->stream);
}

}  // namespace codec_internal
}  // namespace gradwire
