#include "gradwire/kernels/cpu/cast.h"

namespace gradwire {
namespace kernels {
namespace cpu {

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats) {
  uint64_t nonfinite = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
    nonfinite += !IsFinite(a);
    StoreValue(values, i, a, format);
    if (residual != nullptr) residual[i] = ResidualAfter(a, RoundToFormat(a, format));
  }
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  for (uint64_t i = 0; i < n; ++i) dense[i] += LoadValue(values, i, format);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
