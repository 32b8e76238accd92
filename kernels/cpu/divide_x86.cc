#include "gradwire/kernels/cpu/divide_x86.h"

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// ±2^e, normal or denormal: one significant bit.
bool IsPowerOfTwo(float x) {
  const uint32_t a = FloatBits(x) & 0x7fffffffu;
  if (a == 0 || a >= 0x7f800000u) return false;
  const uint32_t m = a & 0x007fffffu;
  return a >= 0x00800000u ? m == 0 : (m & (m - 1)) == 0;
}

GRADWIRE_CPU_CLONES void MultiplyAll(float* values, uint64_t n, float factor) {
  for (uint64_t i = 0; i < n; ++i) values[i] *= factor;
}

GRADWIRE_CPU_CLONES void DivideEach(float* values, uint64_t n, float divisor) {
  for (uint64_t i = 0; i < n; ++i) values[i] /= divisor;
}

GRADWIRE_CPU_CLONES void MultiplyMove(float* __restrict from, float* __restrict to, uint64_t n,
                                      float factor) {
  for (uint64_t i = 0; i < n; ++i) {
    to[i] = from[i] * factor;
    from[i] = 0.0f;
  }
}

GRADWIRE_CPU_CLONES void DivideMove(float* __restrict from, float* __restrict to, uint64_t n,
                                    float divisor) {
  for (uint64_t i = 0; i < n; ++i) {
    to[i] = from[i] / divisor;
    from[i] = 0.0f;
  }
}

}  // namespace

bool ExactReciprocal(float divisor, float* reciprocal) {
  // x / d == x * (1 / d) for every x when 1 / d is exact: both are the one
  // correctly rounded value of the same real number. It is exact when d
  // and its computed reciprocal are both powers of two.
  *reciprocal = 1.0f / divisor;
  return IsPowerOfTwo(divisor) && IsPowerOfTwo(*reciprocal);
}

void DivideAll(float* values, uint64_t n, float divisor) {
  float reciprocal;
  if (ExactReciprocal(divisor, &reciprocal)) {
    MultiplyAll(values, n, reciprocal);
  } else {
    DivideEach(values, n, divisor);
  }
}

void DivideAllInto(float* from, float* to, uint64_t n, float divisor) {
  float reciprocal;
  if (ExactReciprocal(divisor, &reciprocal)) {
    MultiplyMove(from, to, n, reciprocal);
  } else {
    DivideMove(from, to, n, divisor);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
