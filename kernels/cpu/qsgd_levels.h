// QSGD's decoded values, computed the cheap ways the CPU kernels use
// (quantize.cc, quantize_qsgd_average.cc), each equal to element_math.h's
// QsgdDequantize to the bit.
#ifndef GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_
#define GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_

#include <stdint.h>
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// QsgdUnitLevel(q, M) = RN((2q - M) / M) without a division, in float:
// RN(k * hi + RN(k * lo)), k = 2q - M, hi = RN(1 / M) cut to 16
// significant bits (so k * hi, at most 24 bits, is exact) and lo =
// RN(1 / M - hi). The sum is within 2^-40 |k / M| of k / M, and k / M (M
// odd, k odd) is at least 2^-32 |k / M| from any midpoint of floats, so
// the one rounding gives RN(k / M). Checked for every q and M by
// tests/cpu_clones_test.cc (QsgdLevelsMatchUnitLevel).
struct QsgdLevelCoefficients {
  float hi;
  float lo;
};

GRADWIRE_CPU_INLINE QsgdLevelCoefficients QsgdLevelsFor(uint32_t max_code) {
  const double inverse = 1.0 / static_cast<double>(max_code);
  QsgdLevelCoefficients c;
  c.hi = BitsFloat(FloatBits(static_cast<float>(inverse)) & 0xffffff00u);
  c.lo = static_cast<float>(inverse - static_cast<double>(c.hi));
  return c;
}

// QsgdUnitLevel(q, max_code) for k = 2q - max_code, as above.
GRADWIRE_CPU_INLINE float QsgdLevelOf(int32_t k, const QsgdLevelCoefficients& c) {
  const float f = static_cast<float>(k);
  return f * c.hi + f * c.lo;
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// QsgdLevelOf of eight codes (0..M, `max_code` = M as a float) with FMA,
// the same bits: 2q - M is exact either way, and as k * hi is exact,
// fma(k, hi, RN(k * lo)) = RN(k * hi + RN(k * lo)).
// (hi, lo: QsgdLevelCoefficients' broadcast.)
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256 QsgdLevelsV3(__m256i code,
                                                                          __m256 max_code,
                                                                          __m256 hi, __m256 lo) {
  const __m256 k = _mm256_fmsub_ps(_mm256_cvtepi32_ps(code), _mm256_set1_ps(2.0f), max_code);
  return _mm256_fmadd_ps(k, hi, _mm256_mul_ps(k, lo));
}
#endif

#if GRADWIRE_CPU_V4_FUNCTIONS
// QsgdLevelsV3 of sixteen codes.
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512 QsgdLevelsV4(__m512i code,
                                                                          __m512 max_code,
                                                                          __m512 hi, __m512 lo) {
  const __m512 k = _mm512_fmsub_ps(_mm512_cvtepi32_ps(code), _mm512_set1_ps(2.0f), max_code);
  return _mm512_fmadd_ps(k, hi, _mm512_mul_ps(k, lo));
}
#endif

// unit[q] = QsgdUnitLevel(q & (2^bits - 1), 2^bits - 1) for q < 16; times
// a bucket's scale (MulRn), its decoded values for bits <= 4, as two
// eight-lane vectors.
GRADWIRE_CPU_INLINE void QsgdUnitTable(uint32_t bits, float unit[16]) {
  const uint32_t m = QsgdMaxCode(bits);
  const QsgdLevelCoefficients c = QsgdLevelsFor(m);
  for (uint32_t q = 0; q < 16; ++q) {
    unit[q] = QsgdLevelOf(static_cast<int32_t>(2 * (q & m)) - static_cast<int32_t>(m), c);
  }
}

// table[q] = QsgdDequantize(q & (2^bits - 1), scale, 2^bits - 1), q < 16.
GRADWIRE_CPU_INLINE void QsgdDecodedTable(uint32_t bits, float scale, float table[16]) {
  QsgdUnitTable(bits, table);
  for (uint32_t q = 0; q < 16; ++q) table[q] = MulRn(table[q], scale);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_
