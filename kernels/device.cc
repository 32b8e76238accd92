#include "gradwire/kernels/device.h"

namespace gradwire {
namespace kernels {

absl::Status Device::WaitStream(cuda::Stream stream, absl::Time deadline) {
  absl::StatusOr<cuda::Event> event = CreateEvent();
  if (!event.ok()) return event.status();
  absl::Status s = RecordEvent(*event, stream);
  if (s.ok()) s = WaitEvent(*event, deadline);
  DestroyEvent(*event);
  return s;
}

}  // namespace kernels
}  // namespace gradwire
