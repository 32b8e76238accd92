#include "gradwire/kernels/validate.h"

#include <cmath>
#include <string>

namespace gradwire {
namespace kernels {

absl::Status ValidateSgdOptions(const SgdOptions& o) {
  if (!std::isfinite(o.lr) || !std::isfinite(o.momentum) || !std::isfinite(o.dampening) ||
      !std::isfinite(o.weight_decay)) {
    return absl::InvalidArgumentError(
        "SGD: lr, momentum, dampening and weight_decay must be finite");
  }
  if (o.nesterov && (o.momentum == 0.0f || o.dampening != 0.0f)) {
    return absl::InvalidArgumentError("SGD: nesterov needs momentum != 0 and dampening == 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateSgd(absl::Span<const SgdTensor> tensors, const SgdOptions& o) {
  absl::Status options = ValidateSgdOptions(o);
  if (!options.ok()) return options;
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

absl::Status ValidateQuantizedSum(absl::Span<const QuantizedPayload> payloads,
                                  const QuantizedFormat& f, uint64_t n) {
  if (f.bits < 1 || f.bits > 8 || (f.sign && f.bits != 1)) {
    return absl::InvalidArgumentError("QuantizedSumToDense: bits must be 1..8 (1 for sign)");
  }
  if (f.bucket_size < 1) {
    return absl::InvalidArgumentError("QuantizedSumToDense: bucket_size must be >= 1");
  }
  for (size_t w = 0; w < payloads.size(); ++w) {
    if (n > 0 && (payloads[w].scales == nullptr || payloads[w].packed == nullptr)) {
      return absl::InvalidArgumentError("QuantizedSumToDense: worker " + std::to_string(w) +
                                        " has null sections");
    }
  }
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace gradwire
