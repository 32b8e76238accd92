// Internal to :codec: how a codec call runs its kernels where its buffers
// live (lib/codec/device_call.h). On the host the kernels read and write
// the caller's buffers; on the device, kernel outputs are staged in device
// memory and only they come back, through pinned memory, and kernel inputs
// (frame payloads) go out the same way.
#ifndef GRADWIRE_LIB_CODEC_INTERNAL_DEVICE_STAGING_H_
#define GRADWIRE_LIB_CODEC_INTERNAL_DEVICE_STAGING_H_

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/types.h"
#include "gradwire/lib/codec/device_call.h"

namespace gradwire {
namespace codec_internal {

// Where a call whose deciding buffer is `buffer` runs: nullptr for the
// host, `call` for the device. InvalidArgument for a device buffer without
// a DeviceCall (or one without scratch), a stream the device refuses, or
// a frame buffer (`frame`, may be null) in device memory; the runtime's
// error if it cannot say where the buffer lives.
absl::StatusOr<const DeviceCall*> WhereToRun(const char* who, const void* buffer, const void* frame,
                                             const DeviceCall* call);

// kernel(outputs, temp, stats, stream) writes `outs.size()` outputs.
using EncodeKernel =
    absl::FunctionRef<absl::Status(absl::Span<uint8_t* const> outs, void* temp,
                                   kernels::FusedStats* stats, kernels::cuda::Stream stream)>;

// Runs `kernel` with outputs that end up in the host spans `outs` and its
// counters in *fs. Host (device == nullptr): straight into outs, with
// `host_temp`. Device: outputs, stats and temp_bytes of temp in device
// scratch; then only outputs and stats are copied back, through pinned
// memory, and waited for. An output span with a null data pointer (and a
// size) is device-only on the device: the kernel gets room, nothing comes
// back (random-k's indices, which the frame does not carry).
absl::Status RunEncodeKernel(const DeviceCall* device, absl::Span<const absl::Span<uint8_t>> outs,
                             void* host_temp, uint64_t temp_bytes, kernels::FusedStats* fs,
                             EncodeKernel kernel);

// kernel(inputs, stream) reads `ins.size()` inputs.
using DecodeKernel =
    absl::FunctionRef<absl::Status(absl::Span<const uint8_t* const> ins, kernels::cuda::Stream)>;

// Runs `kernel` on the host spans `ins` (host) or on device copies of
// them, made through pinned memory and waited for before the kernel is
// issued (so `ins` may be reused on return; the kernel runs on
// asynchronously on the call's stream).
absl::Status RunDecodeKernel(const DeviceCall* device,
                             absl::Span<const absl::Span<const uint8_t>> ins, DecodeKernel kernel);

// out = 0, on the host or (device) on the call's stream.
absl::Status FillZero(const DeviceCall* device, absl::Span<float> out);
// out = NaN (every bit set), likewise.
absl::Status FillNaN(const DeviceCall* device, absl::Span<float> out);

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_INTERNAL_DEVICE_STAGING_H_
