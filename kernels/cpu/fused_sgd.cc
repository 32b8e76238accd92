#include "gradwire/kernels/cpu/fused_sgd.h"

#include <cmath>
#include <string>

namespace gradwire {
namespace kernels {
namespace cpu {

absl::Status ValidateSgd(absl::Span<const SgdTensor> tensors, const SgdOptions& o) {
  if (!std::isfinite(o.lr) || !std::isfinite(o.momentum) || !std::isfinite(o.dampening) ||
      !std::isfinite(o.weight_decay)) {
    return absl::InvalidArgumentError("SGD: lr, momentum, dampening and weight_decay must be finite");
  }
  if (o.nesterov && (o.momentum == 0.0f || o.dampening != 0.0f)) {
    return absl::InvalidArgumentError("SGD: nesterov needs momentum != 0 and dampening == 0");
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    const SgdTensor& x = tensors[t];
    if (x.size == 0) continue;
    if (x.param == nullptr || x.grad == nullptr) {
      return absl::InvalidArgumentError("SGD: tensor " + std::to_string(t) +
                                        " has no param or grad buffer");
    }
    if (o.momentum != 0.0f && x.momentum == nullptr) {
      return absl::InvalidArgumentError("SGD: tensor " + std::to_string(t) +
                                        " has no momentum buffer but momentum != 0");
    }
  }
  return absl::OkStatus();
}

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
