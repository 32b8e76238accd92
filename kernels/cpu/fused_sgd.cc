#include "gradwire/kernels/cpu/fused_sgd.h"

#include "gradwire/kernels/validate.h"

namespace gradwire {
namespace kernels {
namespace cpu {

absl::Status FusedSgdStep(absl::Span<const SgdTensor> tensors, const SgdOptions& options) {
  absl::Status valid = ValidateSgd(tensors, options);
  if (!valid.ok()) return valid;
  for (const SgdTensor& x : tensors) {
    for (uint64_t i = 0; i < x.size; ++i) {
      SgdUpdate(options, x.grad[i], &x.param[i], x.momentum != nullptr ? &x.momentum[i] : nullptr);
    }
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
