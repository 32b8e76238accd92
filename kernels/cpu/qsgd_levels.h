// QSGD's decoded values in the vector forms the CPU kernels use
// (quantize.cc, quantize_qsgd_v4.cc, quantize_qsgd_average.cc), each equal
// to element_math.h's QsgdDequantize to the bit.
#ifndef GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_
#define GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_

#include <stdint.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

#if GRADWIRE_CPU_V3_FUNCTIONS
// QsgdLevel of eight codes (0..M, `max_code` = M as a float) for a bucket
// whose step (QsgdLevelStep) is `step`: 2q - M by a fused multiply-subtract
// (exact: both products and the difference are small integers), then the
// one rounded multiply.
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256 QsgdLevelsV3(__m256i code,
                                                                          __m256 max_code,
                                                                          __m256 step) {
  return _mm256_mul_ps(
      _mm256_fmsub_ps(_mm256_cvtepi32_ps(code), _mm256_set1_ps(2.0f), max_code), step);
}
#endif

#if GRADWIRE_CPU_V3_FUNCTIONS
// QsgdLevelStep of eight scales (`max_code` = M as a float): RN(s / M), one
// float toward zero where |RN(s / M)| * M > |s|. That test by a fused
// multiply-subtract: |c| * M - |s| is exact before its one rounding and a
// multiple of 2^-149 (c and s are floats, M an integer), so its sign
// survives the rounding, and it is the sign QsgdLevelStep tests in double.
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256 QsgdLevelStepsV3(__m256 scale,
                                                                              __m256 max_code) {
  const __m256 c = _mm256_div_ps(scale, max_code);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 over =
      _mm256_cmp_ps(_mm256_fmsub_ps(_mm256_and_ps(c, magnitude), max_code,
                                    _mm256_and_ps(scale, magnitude)),
                    _mm256_setzero_ps(), _CMP_GT_OQ);
  // over is all ones (-1) where the step goes one float down.
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(c), _mm256_castps_si256(over)));
}
#endif

#if GRADWIRE_CPU_V4_FUNCTIONS
// QsgdLevelStepsV3 of sixteen scales.
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512 QsgdLevelStepsV4(__m512 scale,
                                                                              __m512 max_code) {
  const __m512 c = _mm512_div_ps(scale, max_code);
  const __mmask16 over = _mm512_cmp_ps_mask(
      _mm512_fmsub_ps(_mm512_abs_ps(c), max_code, _mm512_abs_ps(scale)), _mm512_setzero_ps(),
      _CMP_GT_OQ);
  return _mm512_castsi512_ps(
      _mm512_mask_sub_epi32(_mm512_castps_si512(c), over, _mm512_castps_si512(c),
                            _mm512_set1_epi32(1)));
}

// QsgdLevelsV3 of sixteen codes.
GRADWIRE_CPU_V4 inline __attribute__((always_inline)) __m512 QsgdLevelsV4(__m512i code,
                                                                          __m512 max_code,
                                                                          __m512 step) {
  return _mm512_mul_ps(
      _mm512_fmsub_ps(_mm512_cvtepi32_ps(code), _mm512_set1_ps(2.0f), max_code), step);
}
#endif

// multiple[q] = QsgdLevelMultiple(q & (2^bits - 1), 2^bits - 1) for
// q < 16: times a bucket's step (MulRn), its decoded values for
// bits <= 4, as two eight-lane vectors or one of sixteen.
GRADWIRE_CPU_INLINE void QsgdMultipleTable(uint32_t bits, float multiple[16]) {
  const uint32_t m = QsgdMaxCode(bits);
  for (uint32_t q = 0; q < 16; ++q) multiple[q] = QsgdLevelMultiple(q & m, m);
}

// table[q] = QsgdDequantize(q & (2^bits - 1), scale, 2^bits - 1), q < 16.
GRADWIRE_CPU_INLINE void QsgdDecodedTable(uint32_t bits, float scale, float table[16]) {
  QsgdMultipleTable(bits, table);
  const float step = QsgdLevelStep(scale, QsgdMaxCode(bits));
  for (uint32_t q = 0; q < 16; ++q) table[q] = MulRn(table[q], step);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QSGD_LEVELS_H_
