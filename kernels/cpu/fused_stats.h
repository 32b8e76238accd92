// What a fused compress-with-error-feedback kernel observed in one call.
#ifndef GRADWIRE_KERNELS_CPU_FUSED_STATS_H_
#define GRADWIRE_KERNELS_CPU_FUSED_STATS_H_

#include <stdint.h>

namespace gradwire {
namespace kernels {

// Every compress kernel (CPU and CUDA) fills one of these when given a
// non-null pointer. Counters are totals for the call, not increments.
struct FusedStats {
  uint64_t selected = 0;   // values written (k for sparse kernels, n otherwise)
  uint64_t nonfinite = 0;  // elements whose acc = grad + residual was NaN or ±Inf
};

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_FUSED_STATS_H_
