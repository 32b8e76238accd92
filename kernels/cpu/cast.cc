#include "gradwire/kernels/cpu/cast.h"

#include <string.h>

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// One loop per format, so the per-element format switch of StoreValue /
// RoundToFormat is resolved at compile time and the loop vectorizes.
template <ValueFormat F>
uint64_t CastLoop(const float* grad, float* residual, uint64_t n, uint8_t* values) {
  uint64_t nonfinite = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
    nonfinite += !IsFinite(a);
    StoreValue(values, i, a, F);
    if (residual != nullptr) residual[i] = ResidualAfter(a, RoundToFormat(a, F));
  }
  return nonfinite;
}

// fp16 -> fp32 for every one of the 65536 inputs: HalfBitsToFloat's
// branches cost more per element than one load from a 256 KiB table.
const float* HalfTable() {
  static const float* table = [] {
    float* t = new float[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfBitsToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

}  // namespace

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats) {
  uint64_t nonfinite = 0;
  switch (format) {
    case ValueFormat::kFp16:
      nonfinite = CastLoop<ValueFormat::kFp16>(grad, residual, n, values);
      break;
    case ValueFormat::kBf16:
      nonfinite = CastLoop<ValueFormat::kBf16>(grad, residual, n, values);
      break;
    default:
      nonfinite = CastLoop<ValueFormat::kFp32>(grad, residual, n, values);
      break;
  }
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  switch (format) {
    case ValueFormat::kFp16: {
      const float* table = HalfTable();
      for (uint64_t i = 0; i < n; ++i) {
        dense[i] += table[values[2 * i] | values[2 * i + 1] << 8];
      }
      break;
    }
    case ValueFormat::kBf16:
      for (uint64_t i = 0; i < n; ++i) dense[i] += LoadValue(values, i, ValueFormat::kBf16);
      break;
    default:
      for (uint64_t i = 0; i < n; ++i) dense[i] += LoadValue(values, i, ValueFormat::kFp32);
      break;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
