// CPU reference of the fused multi-tensor SGD update (the paper's "parallel
// tensor operator"): one call updates every parameter tensor of a model.
// The CUDA version (kernels/cuda/fused_sgd.h) produces the same bits; both
// use SgdUpdate from kernels/sgd_math.h.
#ifndef GRADWIRE_KERNELS_CPU_FUSED_SGD_H_
#define GRADWIRE_KERNELS_CPU_FUSED_SGD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/sgd_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// Applies one SGD step to every tensor. InvalidArgument (and nothing
// updated) if a non-empty tensor lacks param or grad, or lacks its momentum
// buffer while options.momentum != 0, or if lr/momentum/dampening/
// weight_decay is not finite, or nesterov is set with momentum == 0 or
// dampening != 0 (torch's rule).
// (The checks are kernels/validate.h ValidateSgd, shared with the CUDA
// entry point.)
absl::Status FusedSgdStep(absl::Span<const SgdTensor> tensors, const SgdOptions& options);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_FUSED_SGD_H_
