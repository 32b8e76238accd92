// Argument checks shared by the CPU references and the CUDA entry points, so
// that both refuse the same calls with the same messages. Each looks only at
// host-side values (options, counts, whether pointers are null), never at
// the memory a pointer refers to. Also the early return kernels/ uses for
// such checks (kernels/ uses nothing of base/, so it has its own).
#ifndef GRADWIRE_KERNELS_VALIDATE_H_
#define GRADWIRE_KERNELS_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/sgd_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {

// InvalidArgument if lr/momentum/dampening/weight_decay is not finite, or
// nesterov is set with momentum == 0 or dampening != 0 (torch's rule).
absl::Status ValidateSgdOptions(const SgdOptions& options);

// ValidateSgdOptions, and InvalidArgument if a non-empty tensor lacks param
// or grad, or lacks its momentum buffer while options.momentum != 0.
absl::Status ValidateSgd(absl::Span<const SgdTensor> tensors, const SgdOptions& options);

// InvalidArgument for bits outside 1..8 (1 for sign), bucket_size 0, or a
// worker with null sections while n > 0.
absl::Status ValidateQuantizedSum(absl::Span<const QuantizedPayload> payloads,
                                  const QuantizedFormat& format, uint64_t n);

}  // namespace kernels
}  // namespace gradwire

// Returns the status from the enclosing function if `expr` is not OK.
#define GRADWIRE_KERNELS_RETURN_IF_ERROR(expr)                           \
  do {                                                                   \
    ::absl::Status gradwire_kernels_status_ = (expr);                    \
    if (!gradwire_kernels_status_.ok()) return gradwire_kernels_status_; \
  } while (0)

#endif  // GRADWIRE_KERNELS_VALIDATE_H_
