// QsgdDecodeAverage (quantize.h): the average of several QSGD payloads in
// one pass over the output.
//
// On x86-64-v3 the sums of eight elements stay in a register while every
// payload's codes are added in order: codes of 1, 2 or 4 bits are cut
// from one word per payload by per-lane shifts and looked up in the
// bucket's table of decoded values (qsgd_levels.h) by a permute, codes of
// 8 bits are bytes and decode by QsgdLevelOf. Each decoded value is
// QsgdDequantize's, each sum is formed from +0 in payload order and
// divided once (by a multiply where that gives the same bits, as
// DivideAll), so the result is that of the steps the contract names,
// which is what every other case runs.
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"
#include "gradwire/kernels/cpu/quantize.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// The contract as three steps: zeros, each payload decoded and added in
// order, then the division.
void AverageInSteps(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                    uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out) {
  if (n > 0) memset(out, 0, n * sizeof(float));
  for (uint64_t r = 0; r < frames; ++r) {
    QsgdDecodeAccumulate(scales[r], packed[r], n, bits, bucket_size, out);
  }
  DivideAll(out, n, divisor);
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// Payloads whose sums are carried in registers at a time; more are taken
// in groups, the running sums kept in `out` between them (a float stored
// and reloaded is the same float).
constexpr uint64_t kGroup = 16;

// One group of payloads (scales, packed: its first) over all of out:
// out = (first ? +0 : out) + each payload's decoded values in order,
// divided when `last`. bits is 1, 2 or 4 with bucket_size % 8 == 0, or 8.
GRADWIRE_CPU_V3 void AverageGroupV3(const uint8_t* const* scales, const uint8_t* const* packed,
                                    uint64_t frames, uint64_t n, uint32_t bits,
                                    uint32_t bucket_size, bool first, bool last, float divisor,
                                    float* out) {
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
  const __m256 divide_by = _mm256_set1_ps(multiply ? reciprocal : divisor);
  const uint32_t max_code = QsgdMaxCode(bits);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  const __m256 hi = _mm256_set1_ps(levels.hi), lo = _mm256_set1_ps(levels.lo);
  const __m256 top = _mm256_set1_ps(static_cast<float>(max_code));
  const __m256i shift = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(static_cast<int32_t>(bits)));
  const __m256i mask = _mm256_set1_epi32(static_cast<int32_t>(max_code));
  alignas(32) float unit[16];
  QsgdUnitTable(bits <= 4 ? bits : 4, unit);
  const __m256 unit_lo = _mm256_load_ps(unit), unit_hi = _mm256_load_ps(unit + 8);
  alignas(32) float tables[kGroup][16];
  float bucket_scales[kGroup];
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    for (uint64_t r = 0; r < frames; ++r) {
      bucket_scales[r] = BitsFloat(LoadLe<uint32_t>(scales[r] + 4 * bucket));
      if (bits <= 4) {
        // QsgdDecodedTable.
        const __m256 s = _mm256_set1_ps(bucket_scales[r]);
        _mm256_store_ps(tables[r], _mm256_mul_ps(unit_lo, s));
        _mm256_store_ps(tables[r] + 8, _mm256_mul_ps(unit_hi, s));
      }
    }
    float* o = out + start;
    uint64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      __m256 sum = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o + i);
      const uint64_t element = start + i;
      for (uint64_t r = 0; r < frames; ++r) {
        __m256 d;
        if (bits == 8) {
          const __m256i q = _mm256_cvtepu8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed[r] + element)));
          d = _mm256_mul_ps(QsgdLevelsV3(q, top, hi, lo), _mm256_set1_ps(bucket_scales[r]));
        } else {
          // Eight codes: `bits` bytes from a byte boundary (start and i
          // are multiples of 8).
          const uint8_t* p = packed[r] + element / 8 * bits;
          const uint32_t word = bits == 4   ? LoadLe<uint32_t>(p)
                                : bits == 2 ? LoadLe<uint16_t>(p)
                                            : p[0];
          const __m256i code =
              _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(word)), shift);
          const __m256 low = _mm256_load_ps(tables[r]);
          if (bits == 4) {
            // One permute, of the table's low half (the permute reads
            // the low three bits): the table is odd, table[15 - q] =
            // -table[q] (2(15 - q) - 15 = -(2q - 15), and RN and MulRn
            // commute with negation), and for q >= 8 the low three bits
            // of 15 - q are q's flipped. So: flip them when bit 3 is
            // set, look up, and move bit 3 to the sign. (Two permutes
            // and a blend before: 20-30 % slower.)
            const __m256i upper = _mm256_srai_epi32(_mm256_slli_epi32(code, 28), 31);
            d = _mm256_xor_ps(_mm256_permutevar8x32_ps(low, _mm256_xor_si256(code, upper)),
                              _mm256_castsi256_ps(_mm256_slli_epi32(upper, 31)));
          } else {
            d = _mm256_permutevar8x32_ps(low, _mm256_and_si256(code, mask));
          }
        }
        sum = _mm256_add_ps(sum, d);
      }
      if (last) sum = multiply ? _mm256_mul_ps(sum, divide_by) : _mm256_div_ps(sum, divide_by);
      _mm256_storeu_ps(o + i, sum);
    }
    for (; i < len; ++i) {
      float sum = first ? 0.0f : o[i];
      for (uint64_t r = 0; r < frames; ++r) {
        const uint32_t q = ReadPackedCode(packed[r], start + i, bits);
        sum += bits <= 4 ? tables[r][q]
                         : MulRn(QsgdLevelOf(static_cast<int32_t>(2 * q - max_code), levels),
                                 bucket_scales[r]);
      }
      if (last) sum = multiply ? sum * reciprocal : sum / divisor;
      o[i] = sum;
    }
  }
}
#endif

}  // namespace

void QsgdDecodeAverage(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out) {
#if GRADWIRE_CPU_V3_FUNCTIONS
  const bool fits = bits == 8 || ((bits == 1 || bits == 2 || bits == 4) && bucket_size % 8 == 0);
  if (fits && frames > 0 && CpuIsX86V3()) {
    for (uint64_t r = 0; r < frames; r += kGroup) {
      const uint64_t group = frames - r < kGroup ? frames - r : kGroup;
      AverageGroupV3(scales + r, packed + r, group, n, bits, bucket_size, r == 0,
                     r + group == frames, divisor, out);
    }
    return;
  }
#endif
  AverageInSteps(scales, packed, frames, n, bits, bucket_size, divisor, out);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
