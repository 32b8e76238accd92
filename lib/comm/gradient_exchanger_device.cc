// GradientExchanger with device gradients: the buckets' device memory and
// the copies in and out, all ordered on ExchangerOptions::stream
// (gradient_exchanger.h, "Device memory"; docs/device_path.md).
// CI runs it on kernels::HostDevice; it ran on an H200 (docs/device_path.md).
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/comm/gradient_exchanger.h"

namespace gradwire {

kernels::Device& GradientExchanger::device() const {
  kernels::Device* d = comm_->options().device;
  return d != nullptr ? *d : kernels::CudaDevice();
}

absl::Status GradientExchanger::CheckLocationLocked(absl::string_view name,
                                                    kernels::Location where) {
  auto kind = [](kernels::Location l) {
    return l == kernels::Location::kDevice ? "device memory" : "host memory";
  };
  if (located_) {
    if (where == location_) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "Submit(\"", name, "\"): the gradient is ", kind(where), ", but this exchanger's are ",
        kind(location_), ": one exchanger takes gradients of one kind (use one per kind)"));
  }
  if (where == kernels::Location::kDevice) {
    if (absl::Status s = comm_->CheckDevicePath(options_.stream); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("Submit(\"", name, "\"): device gradients: ", s.message()));
    }
  }
  located_ = true;
  location_ = where;
  return absl::OkStatus();
}

absl::Status GradientExchanger::PrepareDeviceBucketLocked(Bucket* bucket) {
  const size_t bytes = bucket->plan->elements * sizeof(float);
  GRADWIRE_ASSIGN_OR_RETURN(void* memory, device().Allocate(bytes));
  bucket->device_data = static_cast<float*>(memory);
  bucket->on_device = true;
  for (size_t i = 0; i < bucket->plan->members.size(); ++i) {
    GRADWIRE_RETURN_IF_ERROR(CopyInDevice(*bucket, i));
  }
  return absl::OkStatus();
}

absl::Status GradientExchanger::CopyInDevice(const Bucket& bucket, size_t member) {
  const BucketMember& m = bucket.plan->members[member];
  const absl::Span<float> grad = bucket.targets[member];
  float* slot = bucket.device_data + m.offset;
  if (grad.empty() || grad.data() == slot) return absl::OkStatus();  // nothing, or in place
  return device().Copy(slot, grad.data(), m.size * sizeof(float),
                       kernels::CopyKind::kDeviceToDevice, options_.stream);
}

absl::Status GradientExchanger::WriteBackDevice(const Bucket& bucket) {
  const std::vector<BucketMember>& members = bucket.plan->members;
  for (size_t i = 0; i < members.size(); ++i) {
    const BucketMember& m = members[i];
    const absl::Span<float> target = bucket.targets[i];
    const float* slot = bucket.device_data + m.offset;
    if (target.empty() || target.data() == slot) continue;  // nothing, or a slot: in place
    GRADWIRE_RETURN_IF_ERROR(device().Copy(target.data(), slot, m.size * sizeof(float),
                                           kernels::CopyKind::kDeviceToDevice, options_.stream));
  }
  return absl::OkStatus();
}

void GradientExchanger::FreeDeviceBuckets() {
  bool any = false;
  for (const auto& b : buckets_) any = any || b->device_data != nullptr;
  if (!any) return;
  // Free must not race the copies and the decode still queued on the
  // stream. If the stream does not finish in time, leaking is the safe
  // choice.
  kernels::Device& d = device();
  if (!d.WaitStream(options_.stream, absl::Now() + comm_->options().device_timeout).ok()) return;
  for (auto& b : buckets_) {
    d.Free(b->device_data);
    b->device_data = nullptr;
  }
}

}  // namespace gradwire
