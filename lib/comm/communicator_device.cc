// Communicator::AllreduceMeanOnDevice: the exchange of a device buffer
// (communicator.h; docs/device_path.md).
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/comm/communicator.h"

namespace gradwire {

absl::Status Communicator::DenseOnDevice(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                         const DeviceCall& call, ExchangeStats* cost) {
  kernels::Device& device = device_dense_->device();
  const size_t bytes = data.size() * sizeof(float);
  const absl::Time deadline = absl::Now() + call.timeout;
  GRADWIRE_ASSIGN_OR_RETURN(uint8_t * pinned,
                            device_dense_->PinnedBytes(bytes, call.stream, deadline));
  absl::Span<float> host = absl::MakeSpan(reinterpret_cast<float*>(pinned), data.size());
  GRADWIRE_RETURN_IF_ERROR(
      device.Copy(host.data(), data.data(), bytes, kernels::CopyKind::kDeviceToHost, call.stream));
  GRADWIRE_RETURN_IF_ERROR(device.WaitStream(call.stream, deadline));
  GRADWIRE_RETURN_IF_ERROR(Dense(bucket, step, host, cost));
  GRADWIRE_RETURN_IF_ERROR(
      device.Copy(data.data(), host.data(), bytes, kernels::CopyKind::kHostToDevice, call.stream));
  // The staging is free (and the next call may come on another stream)
  // once the copy is done.
  return device.WaitStream(call.stream, absl::Now() + call.timeout);
}

absl::Status Communicator::CheckDevicePath(kernels::cuda::Stream stream) const {
  if (options_.hierarchical) {
    return absl::UnimplementedError("the device path is flat only (hierarchical communicator)");
  }
  if (options_.exchange == ExchangeKind::kSparseAllreduce) {
    return absl::UnimplementedError(
        "the device path exchanges by the sparse allgather only (this communicator forces the "
        "sparse allreduce)");
  }
  kernels::Device& device = options_.device != nullptr ? *options_.device : kernels::CudaDevice();
  if (absl::Status s = device.CheckStream(stream); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("stream: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status Communicator::AllreduceMeanOnDevice(uint32_t bucket, uint64_t step,
                                                 absl::Span<float> data, ExchangePath path,
                                                 kernels::cuda::Stream stream) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  kernels::Device& device = options_.device != nullptr ? *options_.device : kernels::CudaDevice();
  if (absl::Status s = CheckDevicePath(stream); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("AllreduceMeanOnDevice: ", s.message()));
  }
  kernels::Location where = kernels::Location::kDevice;
  if (!data.empty()) GRADWIRE_RETURN_IF_ERROR(kernels::Locate(data.data(), &where));
  if (where != kernels::Location::kDevice) {
    return absl::InvalidArgumentError(
        "AllreduceMeanOnDevice: data is host memory (use AllreduceMean)");
  }
  if (absl::Status s = device.CheckDeviceRange(data.data(), data.size() * sizeof(float)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("AllreduceMeanOnDevice: data: ", s.message()));
  }
  GRADWIRE_RETURN_IF_ERROR(TakeStep(bucket, step));
  if (device_scratch_ == nullptr || &device_scratch_->device() != &device) {
    device_scratch_ = std::make_unique<DeviceScratch>(device);
    device_dense_ = std::make_unique<DeviceScratch>(device);
  }
  const DeviceCall call{device_scratch_.get(), stream, options_.device_timeout};
  const absl::AlphaNum key(bucket);  // as in AllreduceMean: the residual's key
  ExchangeStats cost;
  absl::Status s;
  if (path == ExchangePath::kDense || KindFor(data.size()) == ExchangeKind::kDenseRing) {
    s = DenseOnDevice(bucket, step, data, call, &cost);
  } else {
    const float world = static_cast<float>(world_->size());
    s = flat_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, {}, {}, world, &cost,
                   &call);
  }
  cost.elements = s.ok() ? data.size() : 0;
  last_call_ = cost;
  totals_.Add(cost);
  if (!s.ok()) poison_ = s;
  return s;
}

}  // namespace gradwire
