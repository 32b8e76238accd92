#include "gradwire/kernels/cpu/divide_x86.h"

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

#if defined(__SSE2__)
// MultiplyMove (kMultiply) or DivideMove with to's whole 64-byte lines
// written by streaming stores: four SSE2 stores a line, in every clone
// (the loop waits on memory, not on its width). The lines before the
// first boundary and after the last whole one take ordinary stores: a
// streaming store of part of a line costs a partial write. The same IEEE
// operation per element, so the same bits.
template <bool kMultiply>
void MoveStreaming(float* __restrict from, float* __restrict to, uint64_t n, float by) {
  auto one = [&](uint64_t i) {
    to[i] = kMultiply ? from[i] * by : from[i] / by;
    from[i] = 0.0f;
  };
  uint64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(to + i) & 63) != 0; ++i) one(i);
  const __m128 b = _mm_set1_ps(by);
  for (; i + 16 <= n; i += 16) {
    for (uint64_t q = i; q < i + 16; q += 4) {
      const __m128 v = _mm_loadu_ps(from + q);
      _mm_stream_ps(to + q, kMultiply ? _mm_mul_ps(v, b) : _mm_div_ps(v, b));
      _mm_storeu_ps(from + q, _mm_setzero_ps());
    }
  }
  for (; i < n; ++i) one(i);
}
#endif

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

void DivideAllInto(float* from, float* to, uint64_t n, float divisor, OutStores stores) {
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
#if defined(__SSE2__)
  if (stores == OutStores::kStreaming) {
    if (multiply) {
      MoveStreaming<true>(from, to, n, reciprocal);
    } else {
      MoveStreaming<false>(from, to, n, divisor);
    }
    return;
  }
#endif
  if (multiply) {
    MultiplyMove(from, to, n, reciprocal);
  } else {
    DivideMove(from, to, n, divisor);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
