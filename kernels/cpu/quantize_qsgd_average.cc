// QsgdDecodeAverage (quantize.h): the average of several QSGD payloads in
// one pass over the output.
//
// On x86-64-v3 the sums of eight elements stay in a register while up to
// four payloads' codes are added in order (further payloads in further
// passes over the bucket, the sums kept in out between passes): codes of
// 1 or 2 bits are cut from one word per payload by per-lane shifts and
// looked up in the bucket's table of decoded values (qsgd_levels.h) by a
// permute; codes of 4 bits are cut the same way, codes of 8 bits are
// bytes, and eight codes of 3, 5, 6 or 7 bits (`bits` bytes) are cut from
// one word by a byte shuffle and per-lane shifts; these decode by
// QsgdLevelsV3 (three vector operations a code).
// (Before, 3, 5, 6 and 7 bits ran the three steps below, 3-4x slower.)
// Each decoded value is QsgdDequantize's, each sum is formed from +0 in
// payload order and divided once (by a multiply where that gives the
// same bits, as DivideAll), so the result is that of the steps the
// contract names, which is what every other case runs. On x86-64-v4
// (AVX-512) the same runs sixteen elements a step (AverageGroupV4).
#include <string.h>

#include <type_traits>

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
// The byte shuffle that cuts `codes` codes of `bits` bits, packed from a
// byte boundary, out of the `bytes` bytes a 128-bit lane holds: code j's
// first byte and the next (0x80: none) go to the low half of 32-bit lane
// j (cut[4 j], cut[4 j + 1]; the high half 0x80), and shift[j] is where
// the code starts in them. A code spans at most shift + bits <= 14 of
// their 16 bits. The x86-64-v3 loop cuts eight codes, the v4 loop
// sixteen.
void CodeCut(uint32_t bits, uint32_t codes, uint32_t bytes, uint8_t* cut, uint32_t* shift) {
  for (uint32_t j = 0; j < codes; ++j) {
    const uint32_t byte = j * bits / 8;
    cut[4 * j] = static_cast<uint8_t>(byte);
    cut[4 * j + 1] = static_cast<uint8_t>(byte + 1 < bytes ? byte + 1 : 0x80);
    cut[4 * j + 2] = cut[4 * j + 3] = 0x80;
    shift[j] = j * bits % 8;
  }
}

// Payloads one walk over `out` takes (their steps held for eight or
// sixteen buckets); more are taken in groups, the running sums kept in
// `out` between them (a float stored and reloaded is the same float).
constexpr uint64_t kGroup = 16;

// How eight codes of a payload become eight decoded values.
enum CodesBy {
  kTable,     // 1 or 2 bits: shifts of one word, a permute of the table
  kNibbles,   // 4 bits: shifts of one word, QsgdLevelsV3
  kBytes,     // 8 bits: one code a byte, QsgdLevelsV3
  kExpanded,  // 3, 5, 6 or 7 bits: a byte shuffle and shifts of one word, QsgdLevelsV3
};

// What the x86-64-v3 loop decodes eight codes of a payload with, fixed
// for a call: code j of eight sits at bits [j * bits, (j + 1) * bits) of
// the group's word (kTable, kNibbles: `shift`, `mask`; kExpanded: `cut`,
// `offset`, `mask`, CodeCut), and `top` is M as a float.
struct CodesV3 {
  uint32_t bits;
  uint64_t packed_bytes;  // PackedBytes(n, bits): kExpanded's whole loads stay inside
  __m256i cut, offset, shift, mask;
  __m256 top;
};

// Payload p's decoded values of elements [element, element + 8), element
// a multiple of 8. `param` is the payload's bucket: its step (kNibbles,
// kBytes, kExpanded) or the low half of its table of decoded values
// (kTable: multiple * step, QsgdDecodedTable). kExpanded's load of eight bytes is
// checked against the payload's end when kChecked only (with a check for
// each payload and eight elements, 6-bit at 1M and four payloads ran at
// 0.40 of a memcpy on a Zen 3 guest, 0.47 without: docs/results/
// 2026-12-07-qsgd-average-passes.md).
template <CodesBy kBy, bool kChecked>
GRADWIRE_CPU_V3 inline __attribute__((always_inline)) __m256 Decode8V3(const CodesV3& c,
                                                                       const uint8_t* p,
                                                                       __m256 param,
                                                                       uint64_t element) {
  const uint32_t bits = c.bits;
  if (kBy == kBytes) {
    const __m256i q =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + element)));
    return QsgdLevelsV3(q, c.top, param);
  }
  if (kBy == kExpanded) {
    // Eight codes: `bits` bytes from a byte boundary in every 64-bit lane,
    // cut by `cut` and `offset`. (In vector lanes rather than by Expand on
    // the scalar side: Expand's chain of dependent steps made each
    // iteration wait for the sum, 3x the 8-bit time. A shift of the word
    // per lane pair and a blend, before the shuffle: five instructions
    // where the shuffle takes three.)
    const uint64_t at = element / 8 * bits;
    __m256i word;
    if (!kChecked || at + 8 <= c.packed_bytes) {
      word = _mm256_set1_epi64x(LoadLe<uint64_t>(p + at));
    } else {
      uint8_t bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      memcpy(bytes, p + at, bits);
      word = _mm256_set1_epi64x(LoadLe<uint64_t>(bytes));
    }
    const __m256i q =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(word, c.cut), c.offset), c.mask);
    return QsgdLevelsV3(q, c.top, param);
  }
  if (kBy == kNibbles) {
    // Eight codes: four bytes. (Before, a permute of the table's low half
    // by the table's odd symmetry, which took five operations to index
    // and sign where the mask and QsgdLevelsV3 take four: 4-bit at 1M
    // 0.50 -> 0.61 of a memcpy on a Zen 3 guest, docs/results/
    // 2026-12-07-qsgd-average-passes.md.)
    const __m256i code = _mm256_srlv_epi32(
        _mm256_set1_epi32(static_cast<int32_t>(LoadLe<uint32_t>(p + element / 2))), c.shift);
    return QsgdLevelsV3(_mm256_and_si256(code, c.mask), c.top, param);
  }
  // kTable. Eight codes: `bits` bytes from a byte boundary.
  const uint8_t* w = p + element / 8 * bits;
  const uint32_t word = bits == 2 ? LoadLe<uint16_t>(w) : w[0];
  const __m256i code = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int32_t>(word)), c.shift);
  return _mm256_permutevar8x32_ps(param, _mm256_and_si256(code, c.mask));
}

// Payloads whose codes one pass over a bucket's elements adds; a group's
// payloads are taken this many at a time, each pass with its count fixed
// at compile time so that the payloads' pointers and parameters stay in
// registers (a loop over a run-time count reloaded them for every eight
// elements: 8-bit at 1M and four payloads 0.41-0.44 of a memcpy on a
// Zen 3 guest, against 0.50-0.54 in passes; same page).
constexpr uint64_t kPass = 4;

// Elements [0, len8) of a bucket (len8 a multiple of 8; o its first
// element, element its index): o = (zero ? +0 : o) + the decoded values of
// payloads p[0 .. kCount) in order, then divided by `divide_by` (a
// multiply where `multiply`) when `divide`. Elements from `safe` (a
// multiple of 8) on are decoded with kExpanded's load checked.
template <CodesBy kBy, int kCount>
GRADWIRE_CPU_V3 void AddPassV3(const CodesV3& c, const uint8_t* const* p, const __m256* param,
                               uint64_t element, uint64_t len8, uint64_t safe, bool zero,
                               bool divide, bool multiply, __m256 divide_by, float* o) {
  const uint8_t* pk[kCount];
  __m256 pm[kCount];
  for (int k = 0; k < kCount; ++k) {
    pk[k] = p[k];
    pm[k] = param[k];
  }
  auto add8 = [&](uint64_t i, auto checked)
      __attribute__((target("arch=x86-64-v3"), always_inline)) {
    __m256 sum = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(o + i);
    for (int k = 0; k < kCount; ++k) {
      sum = _mm256_add_ps(sum,
                          Decode8V3<kBy, decltype(checked)::value>(c, pk[k], pm[k], element + i));
    }
    if (divide) sum = multiply ? _mm256_mul_ps(sum, divide_by) : _mm256_div_ps(sum, divide_by);
    _mm256_storeu_ps(o + i, sum);
  };
  const uint64_t end = safe < len8 ? safe : len8;
  uint64_t i = 0;
  for (; i < end; i += 8) add8(i, std::false_type());
  for (; i < len8; i += 8) add8(i, std::true_type());
}

// One group of payloads (scales, packed: its first) over all of out:
// out = (first ? +0 : out) + each payload's decoded values in order,
// divided when `last`. bits is 8, or any other with bucket_size % 8 == 0
// (so that every bucket starts a group of eight codes on a byte).
template <CodesBy kBy>
GRADWIRE_CPU_V3 void AverageGroupV3(const uint8_t* const* scales, const uint8_t* const* packed,
                                    uint64_t frames, uint64_t n, uint32_t bits,
                                    uint32_t bucket_size, bool first, bool last, float divisor,
                                    float* out) {
  CodesV3 c;
  c.bits = bits;
  c.packed_bytes = PackedBytes(n, bits);
  // kExpanded: the group's eight bytes stand in both 128-bit halves; one
  // byte shuffle (`cut`), a per-lane shift (`offset`) and the mask cut
  // out its eight codes (CodeCut).
  alignas(32) uint8_t cut_bytes[32];
  alignas(32) uint32_t offsets[8];
  CodeCut(bits, 8, 8, cut_bytes, offsets);
  c.cut = _mm256_load_si256(reinterpret_cast<const __m256i*>(cut_bytes));
  c.offset = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
  const uint32_t max_code = QsgdMaxCode(bits);
  c.top = _mm256_set1_ps(static_cast<float>(max_code));
  c.shift = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                               _mm256_set1_epi32(static_cast<int32_t>(bits)));
  c.mask = _mm256_set1_epi32(static_cast<int32_t>(max_code));
  // kExpanded reads the eight bytes at e / 8 * bits for element e: whole
  // for every e (a multiple of 8) below safe_end.
  const uint64_t safe_end = kBy != kExpanded     ? n
                            : c.packed_bytes < 8 ? 0
                                                 : ((c.packed_bytes - 8) / bits + 1) * 8;
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
  const __m256 divide_by = _mm256_set1_ps(multiply ? reciprocal : divisor);
  // kTable: the permute reads a table's low half only (codes of 1 and 2
  // bits are below 4). Unused for the other widths.
  alignas(32) float multiple[16];
  QsgdMultipleTable(bits, multiple);
  const __m256 multiple_lo = _mm256_load_ps(multiple);
  // Each payload's QsgdLevelStep for eight buckets, [bucket % 8], taken
  // every eighth bucket by one vector division and test (QsgdLevelStepsV3)
  // rather than a scalar division for every bucket and payload.
  alignas(32) float steps[kGroup][8];
  __m256 param[kGroup];
  const uint64_t buckets = (n + bucket_size - 1) / bucket_size;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const uint64_t slot = bucket % 8;
    if (slot == 0) {
      for (uint64_t r = 0; r < frames; ++r) {
        if (bucket + 8 <= buckets) {
          const __m256 s =
              _mm256_loadu_ps(reinterpret_cast<const float*>(scales[r] + 4 * bucket));
          _mm256_store_ps(steps[r], QsgdLevelStepsV3(s, c.top));
        } else {
          for (uint64_t b = bucket; b < buckets; ++b) {
            steps[r][b - bucket] =
                QsgdLevelStep(BitsFloat(LoadLe<uint32_t>(scales[r] + 4 * b)), max_code);
          }
        }
      }
    }
    for (uint64_t r = 0; r < frames; ++r) {
      const __m256 step = _mm256_set1_ps(steps[r][slot]);
      param[r] = kBy == kTable ? _mm256_mul_ps(multiple_lo, step) : step;
    }
    float* o = out + start;
    // Eight elements a step for every width. Sixteen a step in two sums
    // (for the codes QsgdLevelsV3 decodes) was 5-11 % faster on a Zen 3
    // core but twice as slow on a Zen 5 core with `out` cold (1M
    // elements, 6 and 8 bits; equal in cache): docs/results/
    // 2026-11-28-qsgd-decode.md.
    const uint64_t len8 = len / 8 * 8;
    const uint64_t safe = safe_end > start ? safe_end - start : 0;
    for (uint64_t r = 0; r < frames; r += kPass) {
      const uint64_t count = frames - r < kPass ? frames - r : kPass;
      const bool zero = first && r == 0, divide = last && r + count == frames;
      auto* pass = count == 4   ? AddPassV3<kBy, 4>
                   : count == 3 ? AddPassV3<kBy, 3>
                   : count == 2 ? AddPassV3<kBy, 2>
                                : AddPassV3<kBy, 1>;
      pass(c, packed + r, param + r, start, len8, safe, zero, divide, multiply, divide_by, o);
    }
    for (uint64_t i = len8; i < len; ++i) {
      float sum = first ? 0.0f : o[i];
      for (uint64_t r = 0; r < frames; ++r) {
        sum += QsgdLevel(ReadPackedCode(packed[r], start + i, bits), steps[r][slot], max_code);
      }
      if (last) sum = multiply ? sum * reciprocal : sum / divisor;
      o[i] = sum;
    }
  }
}
#endif

#if GRADWIRE_CPU_V4_FUNCTIONS
// AverageGroupV3 at sixteen lanes (AVX-512), for every width, with the
// same sums in the same order. A step's sixteen codes are 2 * bits bytes
// from a byte boundary, read by a masked load (nothing past them is
// touched), copied to each 128-bit lane, and cut out by one byte shuffle
// (code j's two bytes to lane j), a per-lane shift and a mask; 8-bit
// codes are widened from bytes. Widths <= 4 decode by one permute of the
// bucket's sixteen-entry table, the others by QsgdLevelsV4. A bucket's
// last step, shorter than sixteen, runs masked: so do buckets whose size
// is not a multiple of 16.
GRADWIRE_CPU_V4_BEGIN
GRADWIRE_CPU_V4 void AverageGroupV4(const uint8_t* const* scales, const uint8_t* const* packed,
                                    uint64_t frames, uint64_t n, uint32_t bits,
                                    uint32_t bucket_size, bool first, bool last, float divisor,
                                    float* out) {
  const uint64_t packed_bytes = PackedBytes(n, bits);
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
  const __m512 divide_by = _mm512_set1_ps(multiply ? reciprocal : divisor);
  const uint32_t max_code = QsgdMaxCode(bits);
  const __m512 top = _mm512_set1_ps(static_cast<float>(max_code));
  const __m512i mask = _mm512_set1_epi32(static_cast<int32_t>(max_code));
  // The step's sixteen bytes stand in every 128-bit lane (CodeCut).
  alignas(64) uint8_t cut[64];
  alignas(64) uint32_t shift[16];
  CodeCut(bits, 16, 16, cut, shift);
  // pshufb indexes within each 128-bit lane: lane L's bytes are the
  // step's bytes, so its indices stand as they are.
  const __m512i cut_v = _mm512_load_si512(cut);
  const __m512i shift_v = _mm512_load_si512(shift);
  const bool table = bits <= 4;
  alignas(64) float multiple[16];
  QsgdMultipleTable(bits, multiple);  // unused unless `table`
  const __m512 multiple_v = _mm512_load_ps(multiple);
  alignas(64) float tables[kGroup][16];
  // Each payload's QsgdLevelStep for sixteen buckets, [bucket % 16], as in
  // AverageGroupV3.
  alignas(64) float steps[kGroup][16];
  const uint64_t buckets = (n + bucket_size - 1) / bucket_size;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const uint64_t slot = bucket % 16;
    if (slot == 0) {
      for (uint64_t r = 0; r < frames; ++r) {
        if (bucket + 16 <= buckets) {
          const __m512 s = _mm512_loadu_ps(scales[r] + 4 * bucket);
          _mm512_store_ps(steps[r], QsgdLevelStepsV4(s, top));
        } else {
          for (uint64_t b = bucket; b < buckets; ++b) {
            steps[r][b - bucket] =
                QsgdLevelStep(BitsFloat(LoadLe<uint32_t>(scales[r] + 4 * b)), max_code);
          }
        }
      }
    }
    if (table) {
      for (uint64_t r = 0; r < frames; ++r) {
        _mm512_store_ps(tables[r], _mm512_mul_ps(multiple_v, _mm512_set1_ps(steps[r][slot])));
      }
    }
    float* o = out + start;
    for (uint64_t i = 0; i < len; i += 16) {
      const uint64_t count = len - i < 16 ? len - i : 16;
      const __mmask16 lanes = static_cast<__mmask16>((uint32_t{1} << count) - 1);
      const __mmask16 bytes = static_cast<__mmask16>((uint32_t{1} << ((count * bits + 7) / 8)) - 1);
      const uint64_t at = (start + i) * bits / 8;  // whole: start + i is a multiple of 8, or bits 8
      const bool whole = count == 16;
      const bool wide = at + 16 <= packed_bytes;
      __m512 sum = first   ? _mm512_setzero_ps()
                   : whole ? _mm512_loadu_ps(o + i)
                           : _mm512_maskz_loadu_ps(lanes, o + i);
      for (uint64_t r = 0; r < frames; ++r) {
        const __m128i b = wide ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed[r] + at))
                               : _mm_maskz_loadu_epi8(bytes, packed[r] + at);
        __m512i code;
        if (bits == 8) {
          code = _mm512_cvtepu8_epi32(b);
        } else {
          code = _mm512_and_si512(
              _mm512_srlv_epi32(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(b), cut_v), shift_v),
              mask);
        }
        const __m512 d =
            table ? _mm512_permutexvar_ps(code, _mm512_load_ps(tables[r]))
                  : QsgdLevelsV4(code, top, _mm512_set1_ps(steps[r][slot]));
        sum = _mm512_add_ps(sum, d);
      }
      if (last) sum = multiply ? _mm512_mul_ps(sum, divide_by) : _mm512_div_ps(sum, divide_by);
      if (whole) {
        _mm512_storeu_ps(o + i, sum);
      } else {
        _mm512_mask_storeu_ps(o + i, lanes, sum);
      }
    }
  }
}
GRADWIRE_CPU_V4_END
#endif

}  // namespace

void QsgdDecodeAverage(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out) {
#if GRADWIRE_CPU_V3_FUNCTIONS
  const bool fits = bits >= 1 && bits <= 8 && (bits == 8 || bucket_size % 8 == 0);
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (fits && frames > 0 && CpuIsX86V4()) {
    for (uint64_t r = 0; r < frames; r += kGroup) {
      const uint64_t group = frames - r < kGroup ? frames - r : kGroup;
      AverageGroupV4(scales + r, packed + r, group, n, bits, bucket_size, r == 0,
                     r + group == frames, divisor, out);
    }
    return;
  }
#endif
  if (fits && frames > 0 && CpuIsX86V3()) {
    auto* group_v3 = bits == 8                 ? AverageGroupV3<kBytes>
                     : bits == 4               ? AverageGroupV3<kNibbles>
                     : bits == 1 || bits == 2  ? AverageGroupV3<kTable>
                                               : AverageGroupV3<kExpanded>;
    for (uint64_t r = 0; r < frames; r += kGroup) {
      const uint64_t group = frames - r < kGroup ? frames - r : kGroup;
      group_v3(scales + r, packed + r, group, n, bits, bucket_size, r == 0, r + group == frames,
               divisor, out);
    }
    return;
  }
#endif
  AverageInSteps(scales, packed, frames, n, bits, bucket_size, divisor, out);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
