#include "gradwire/kernels/cpu/cast.h"

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/prefetch.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// The loops below are written without branches (every case computed, the
// answer selected) so that GCC vectorizes them in every clone; each helper
// returns the bits its element_math.h counterpart returns, which the tests
// check over every input class (and every fp16 value).

// FloatToBf16Bits.
GRADWIRE_CPU_INLINE uint32_t Bf16Bits(uint32_t x) {
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  r = SelectBits(a >= 0x7f7f8000u, ((x >> 16) & 0x8000u) | kBf16MaxBits, r);
  r = SelectBits(a == 0x7f800000u, x >> 16, r);
  r = SelectBits(a > 0x7f800000u, (x >> 16) | 0x0040u, r);
  return r & 0xffffu;
}

// int32 lanes to float, exactly (|x| < 2^24 here): one lane or a vector.
GRADWIRE_CPU_INLINE void ToFloat(const int32_t& x, float* f) { *f = static_cast<float>(x); }
template <typename S, typename F>
GRADWIRE_CPU_INLINE void ToFloat(const S& x, F* f) {
  *f = __builtin_convertvector(x, F);
}

// HalfBitsToFloat's bits for h < 2^16, one lane or a vector of lanes (as
// HalfRound). Subnormal: m * 2^-24, exact. Normal: rebias. e == 31: Inf
// or NaN.
template <typename U, typename S, typename F>
GRADWIRE_CPU_INLINE void HalfToFloatBits(const U& h, U* out) {
  const U e = (h >> 10) & 0x1fu;
  const U m13 = (h & 0x3ffu) << 13;
  F m;
  ToFloat(GRADWIRE_BITCAST(S, h & 0x3ffu), &m);
  const U subnormal = GRADWIRE_BITCAST(U, m * 5.9604644775390625e-8f);
  U r = e == 0 ? subnormal : ((e + 112u) << 23) | m13;
  r = e == 0x1fu ? 0x7f800000u | m13 : r;
  *out = ((h & 0x8000u) << 16) | r;
}

GRADWIRE_CPU_INLINE float HalfFloat(uint32_t h) {
  uint32_t bits;
  HalfToFloatBits<uint32_t, int32_t, float>(h, &bits);
  return BitsFloat(bits);
}

// FloatToHalfBits(x) into *half, and, when x is finite, the residual
// ResidualAfter(x, HalfBitsToFloat(*half)) into *residual as bits (0 otherwise):
// the decoded value is formed from the rounding itself, not by converting
// the half back. For |x| >= 2^-14 the rounded magnitude is x's bits
// rounded at bit 13 (a carry into the exponent is right), saturated at
// 65504; its half bits are those rebiased. Below, |x| + 0.5 rounds |x| to
// a multiple of 2^-24 (the sum's low bits count them) and subtracting 0.5
// again is exact. Non-finite x: its residual is 0 whatever it decodes to.
// One lane (U = uint32_t, S = int32_t, F = float) or a vector of lanes
// (GCC vector types of the same three kinds), written once for both.
template <typename U, typename S, typename F>
GRADWIRE_CPU_INLINE void HalfRound(const U& x, U* half, U* residual) {
  const U a = x & 0x7fffffffu;
  const S signed_a = GRADWIRE_BITCAST(S, a);  // a < 2^31: signed compares are exact
  const U sign = x & 0x80000000u;
  const F sum = GRADWIRE_BITCAST(F, a) + 0.5f;
  const auto subnormal = signed_a < 0x38800000;
  U rounded = (a + 0x0fffu + ((a >> 13) & 1u)) & 0xffffe000u;
  rounded = signed_a >= 0x477ff000 ? U{} + 0x477fe000u : rounded;  // 65504
  const U magnitude = subnormal ? GRADWIRE_BITCAST(U, sum - 0.5f) : rounded;
  U h = subnormal ? GRADWIRE_BITCAST(U, sum) - 0x3f000000u : (rounded - 0x38000000u) >> 13;
  const auto finite = signed_a < 0x7f800000;
  const U special = 0x7c00u | ((a >> 13) & 0x1ffu) | (signed_a > 0x7f800000 ? U{} + 0x200u : U{});
  h = finite ? h : special;
  *half = (sign >> 16) | h;
  const U r = GRADWIRE_BITCAST(U, GRADWIRE_BITCAST(F, x) - GRADWIRE_BITCAST(F, sign | magnitude));
  *residual = finite ? r : U{};
}

// One element: stores acc's value and returns its residual.
template <ValueFormat F>
GRADWIRE_CPU_INLINE float CastElement(float a, uint8_t* values, uint64_t i) {
  const uint32_t x = FloatBits(a);
  float decoded = a;
  if (F == ValueFormat::kFp16) {
    uint32_t h, r;
    HalfRound<uint32_t, int32_t, float>(x, &h, &r);
    StoreLe<uint16_t>(values + 2 * i, static_cast<uint16_t>(h));
    return BitsFloat(r);
  } else if (F == ValueFormat::kBf16) {
    const uint32_t b = Bf16Bits(x);
    StoreLe<uint16_t>(values + 2 * i, static_cast<uint16_t>(b));
    decoded = BitsFloat(b << 16);
  } else {
    StoreLe<uint32_t>(values + 4 * i, x);
  }
  return ResidualAfter(a, decoded);
}

// Elements [begin, end) one at a time (CastElement); returns the count of
// non-finite acc.
template <ValueFormat F, bool kHasResidual>
GRADWIRE_CPU_INLINE uint32_t CastElements(const float* grad, float* residual, uint64_t begin,
                                          uint64_t end, uint8_t* values) {
  uint32_t nonfinite = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const float a = kHasResidual ? grad[i] + residual[i] : grad[i];
    nonfinite += IsFinite(a) ? 0u : 1u;
    const float r = CastElement<F>(a, values, i);
    if (kHasResidual) residual[i] = r;
  }
  return nonfinite;
}

// Counts, per lane, the lanes of x (float bits) that are not finite: *bad
// += 1 there. (An out-parameter: a 32-byte vector returned by value draws
// GCC's -Wpsabi note in the builds without AVX.)
GRADWIRE_CPU_INLINE void CountNotFinite(const U32x8& x, U32x8* bad) {
  *bad -= (U32x8)(GRADWIRE_BITCAST(I32x8, x & 0x7fffffffu) >= 0x7f800000);
}

// *acc = grad + residual (kHasResidual) or grad, elements [i, i + 8).
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void LoadAcc8(const float* grad, const float* residual, uint64_t i,
                                  F32x8* acc) {
  memcpy(acc, grad + i, sizeof *acc);
  if (kHasResidual) {
    F32x8 r;
    memcpy(&r, residual + i, sizeof r);
    *acc += r;
  }
}

// The fp16 cast of elements [start, end) eight at a time, as far as whole
// vectors go: HalfRound on vectors (GCC's scalar vectorizer spills its
// many selects). Adds the non-finite count; returns where it stopped.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t HalfVectors(const float* grad, float* residual, uint64_t start,
                                         uint64_t end, uint8_t* values, uint32_t* nonfinite) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  U32x8 bad = {};
  uint64_t i = start;
  for (; i + 8 <= end; i += 8) {
    if (i % 16 == 0) PrefetchAccStreams<kHasResidual, kCastPrefetchAheadBytes>(grad, residual, i);
    F32x8 acc;
    LoadAcc8<kHasResidual>(grad, residual, i, &acc);
    const U32x8 x = GRADWIRE_BITCAST(U32x8, acc);
    CountNotFinite(x, &bad);
    U32x8 h, r;
    HalfRound<U32x8, I32x8, F32x8>(x, &h, &r);
    const U16x8 h16 = __builtin_convertvector(h, U16x8);
    memcpy(values + 2 * i, &h16, sizeof h16);
    if (kHasResidual) memcpy(residual + i, &r, sizeof r);
  }
  for (int l = 0; l < 8; ++l) *nonfinite += bad[l];
  return i;
#else
  return start;  // the element loop stores little endian
#endif
}

typedef uint64_t U64x4 __attribute__((vector_size(32)));

// Whether any lane of a mask (or any bit of a vector) is set.
GRADWIRE_CPU_INLINE bool AnyLane(const U32x8& mask) {
  const U64x4 q = GRADWIRE_BITCAST(U64x4, mask);
  return ((q[0] | q[1]) | (q[2] | q[3])) != 0;
}

// The fp32 cast of elements [start, end) sixteen at a time, as far as
// whole steps go: the values are acc's bits, and the residual,
// ResidualAfter(acc, acc), is +0 whatever acc is (acc - acc: +0 when
// finite, NaN otherwise). It is stored only where one of the step's 16
// residuals (a cache line's worth) is not +0 already, so a residual that
// stays zero, as it does from the second step on, is read but never
// written back. Adds the non-finite count; returns where it stopped.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t CopyVectors(const float* grad, float* residual, uint64_t start,
                                         uint64_t end, uint8_t* values, uint32_t* nonfinite) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  U32x8 bad = {};
  uint64_t i = start;
  for (; i + 16 <= end; i += 16) {
    PrefetchAccStreams<kHasResidual, kCastPrefetchAheadBytes>(grad, residual, i);
    F32x8 a0, a1;
    memcpy(&a0, grad + i, sizeof a0);
    memcpy(&a1, grad + i + 8, sizeof a1);
    if (kHasResidual) {
      U32x8 r0, r1;
      memcpy(&r0, residual + i, sizeof r0);
      memcpy(&r1, residual + i + 8, sizeof r1);
      a0 += GRADWIRE_BITCAST(F32x8, r0);
      a1 += GRADWIRE_BITCAST(F32x8, r1);
      if (AnyLane(r0 | r1)) {
        const U32x8 zero = {};
        memcpy(residual + i, &zero, sizeof zero);
        memcpy(residual + i + 8, &zero, sizeof zero);
      }
    }
    memcpy(values + 4 * i, &a0, sizeof a0);
    memcpy(values + 4 * i + sizeof a0, &a1, sizeof a1);
    CountNotFinite(GRADWIRE_BITCAST(U32x8, a0), &bad);
    CountNotFinite(GRADWIRE_BITCAST(U32x8, a1), &bad);
  }
  for (int l = 0; l < 8; ++l) *nonfinite += bad[l];
  return i;
#else
  return start;  // the element loop stores little endian
#endif
}

// The bf16 cast of elements [start, end) eight at a time, as far as whole
// vectors go. Below the saturation edge (|acc| < 0x7f7f8000 as bits, so
// finite) Bf16Bits is the rounding add alone, and it carries neither into
// the sign nor to Inf; the decoded value is the rounded bits' top half. A
// vector with a lane at or beyond the edge goes element by element. Adds
// the non-finite count; returns where it stopped.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t Bf16Vectors(const float* grad, float* residual, uint64_t start,
                                         uint64_t end, uint8_t* values, uint32_t* nonfinite) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t i = start;
  for (; i + 8 <= end; i += 8) {
    if (i % 16 == 0) PrefetchAccStreams<kHasResidual, kCastPrefetchAheadBytes>(grad, residual, i);
    F32x8 acc;
    LoadAcc8<kHasResidual>(grad, residual, i, &acc);
    const U32x8 x = GRADWIRE_BITCAST(U32x8, acc);
    if (AnyLane((U32x8)(GRADWIRE_BITCAST(I32x8, x & 0x7fffffffu) >= 0x7f7f8000))) {
      *nonfinite +=
          CastElements<ValueFormat::kBf16, kHasResidual>(grad, residual, i, i + 8, values);
      continue;
    }
    const U32x8 rounded = x + 0x7fffu + ((x >> 16) & 1u);
    const U16x8 b16 = __builtin_convertvector(rounded >> 16, U16x8);
    memcpy(values + 2 * i, &b16, sizeof b16);
    if (kHasResidual) {
      const F32x8 r = acc - GRADWIRE_BITCAST(F32x8, rounded & 0xffff0000u);
      memcpy(residual + i, &r, sizeof r);
    }
  }
  return i;
#else
  return start;  // the element loop stores little endian
#endif
}

template <ValueFormat F, bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t CastLoop(const float* grad, float* residual, uint64_t n,
                                      uint8_t* values) {
  uint32_t nonfinite = 0;
  uint64_t total = 0;
  // Counted in 32-bit lanes, flushed before they could wrap.
  constexpr uint64_t kRun = uint64_t{1} << 30;
  for (uint64_t start = 0; start < n; start += kRun) {
    const uint64_t end = n - start < kRun ? n : start + kRun;
    nonfinite = 0;
    uint64_t i = start;
    if (F == ValueFormat::kFp16)
      i = HalfVectors<kHasResidual>(grad, residual, start, end, values, &nonfinite);
    if (F == ValueFormat::kFp32)
      i = CopyVectors<kHasResidual>(grad, residual, start, end, values, &nonfinite);
    if (F == ValueFormat::kBf16)
      i = Bf16Vectors<kHasResidual>(grad, residual, start, end, values, &nonfinite);
    nonfinite += CastElements<F, kHasResidual>(grad, residual, i, end, values);
    total += nonfinite;
  }
  return total;
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// The fp16 cast with F16C, for x86-64-v3: vcvtps2ph rounds to nearest even
// into half subnormals exactly as HalfRound does, and vcvtph2ps gives the
// decoded value exactly, for every finite |acc| < 65520. A vector with a
// lane beyond (a saturating or non-finite one) goes through HalfRound.
// Returns the non-finite count.
template <bool kHasResidual>
GRADWIRE_CPU_V3 uint64_t HalfCastV3(const float* grad, float* residual, uint64_t n,
                                    uint8_t* values) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i last_rounding = _mm256_set1_epi32(0x477fefff);  // below 65520
  uint64_t nonfinite = 0;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 16 == 0) PrefetchAccStreams<kHasResidual, kCastPrefetchAheadBytes>(grad, residual, i);
    __m256 acc = _mm256_loadu_ps(grad + i);
    if (kHasResidual) acc = _mm256_add_ps(acc, _mm256_loadu_ps(residual + i));
    const __m256i x = _mm256_castps_si256(acc);
    const __m256i beyond = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), last_rounding);
    if (!_mm256_testz_si256(beyond, beyond)) {
      const U32x8 xv = GRADWIRE_BITCAST(U32x8, x);
      U32x8 h, r;
      HalfRound<U32x8, I32x8, F32x8>(xv, &h, &r);
      for (int l = 0; l < 8; ++l) nonfinite += (xv[l] & 0x7fffffffu) >= 0x7f800000u;
      const U16x8 h16 = __builtin_convertvector(h, U16x8);
      memcpy(values + 2 * i, &h16, sizeof h16);
      if (kHasResidual) memcpy(residual + i, &r, sizeof r);
      continue;
    }
    const __m128i h = _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 2 * i), h);
    if (kHasResidual) _mm256_storeu_ps(residual + i, _mm256_sub_ps(acc, _mm256_cvtph_ps(h)));
  }
  return nonfinite + CastElements<ValueFormat::kFp16, kHasResidual>(grad, residual, i, n, values);
}
#endif

template <ValueFormat F>
GRADWIRE_CPU_CLONES uint64_t CastCompressAs(const float* grad, float* residual, uint64_t n,
                                            uint8_t* values) {
  return residual != nullptr ? CastLoop<F, true>(grad, residual, n, values)
                             : CastLoop<F, false>(grad, residual, n, values);
}

// One value of format F at p, decoded (LoadValue).
template <ValueFormat F>
GRADWIRE_CPU_INLINE float DecodeOne(const uint8_t* p) {
  if (F == ValueFormat::kFp16) return HalfFloat(LoadLe<uint16_t>(p));
  if (F == ValueFormat::kBf16) return BitsFloat(static_cast<uint32_t>(LoadLe<uint16_t>(p)) << 16);
  return BitsFloat(LoadLe<uint32_t>(p));
}

// *sum += the eight values of format F at p, decoded as DecodeOne does.
template <ValueFormat F>
GRADWIRE_CPU_INLINE void AddDecoded8(const uint8_t* p, F32x8* sum) {
  if (F == ValueFormat::kFp32) {
    F32x8 v;
    memcpy(&v, p, sizeof v);
    *sum += v;
    return;
  }
  U16x8 h16;
  memcpy(&h16, p, sizeof h16);
  U32x8 bits = __builtin_convertvector(h16, U32x8);
  if (F == ValueFormat::kFp16) {
    HalfToFloatBits<U32x8, I32x8, F32x8>(bits, &bits);
  } else {
    bits <<= 16;
  }
  *sum += GRADWIRE_BITCAST(F32x8, bits);
}

// The element loops store and load little endian through vectors.
constexpr bool kVectorsAreLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

template <ValueFormat F>
GRADWIRE_CPU_CLONES void DecodeAccumulateAs(const uint8_t* values, uint64_t n, float* dense) {
  constexpr uint64_t kWidth = F == ValueFormat::kFp32 ? 4 : 2;
  uint64_t i = 0;
  for (; kVectorsAreLittleEndian && i + 8 <= n; i += 8) {
    F32x8 d;
    memcpy(&d, dense + i, sizeof d);
    AddDecoded8<F>(values + kWidth * i, &d);
    memcpy(dense + i, &d, sizeof d);
  }
  for (; i < n; ++i) dense[i] += DecodeOne<F>(values + kWidth * i);
}

// out[i] = (((0 + v_0) + v_1) + ...) / divisor (kMultiply: * reciprocal,
// the same bits), 32 elements a step in four independent sums (one chain
// of adds would wait on each add's latency).
template <ValueFormat F, bool kMultiply>
GRADWIRE_CPU_INLINE void AverageLoop(const uint8_t* const* values, uint64_t frames, uint64_t n,
                                     float divisor, float reciprocal, float* out) {
  constexpr uint64_t kWidth = F == ValueFormat::kFp32 ? 4 : 2;
  uint64_t i = 0;
  for (; kVectorsAreLittleEndian && i + 32 <= n; i += 32) {
    // Named, not an array: GCC keeps these in registers.
    F32x8 s0 = {}, s1 = {}, s2 = {}, s3 = {};  // +0, as the zeroed output
    for (uint64_t r = 0; r < frames; ++r) {
      const uint8_t* p = values[r] + kWidth * i;
      AddDecoded8<F>(p, &s0);
      AddDecoded8<F>(p + 8 * kWidth, &s1);
      AddDecoded8<F>(p + 16 * kWidth, &s2);
      AddDecoded8<F>(p + 24 * kWidth, &s3);
    }
    if (kMultiply) {
      s0 *= reciprocal, s1 *= reciprocal, s2 *= reciprocal, s3 *= reciprocal;
    } else {
      s0 /= divisor, s1 /= divisor, s2 /= divisor, s3 /= divisor;
    }
    memcpy(out + i, &s0, sizeof s0);
    memcpy(out + i + 8, &s1, sizeof s1);
    memcpy(out + i + 16, &s2, sizeof s2);
    memcpy(out + i + 24, &s3, sizeof s3);
  }
  for (; i < n; ++i) {
    float sum = 0.0f;
    for (uint64_t r = 0; r < frames; ++r) sum += DecodeOne<F>(values[r] + kWidth * i);
    out[i] = kMultiply ? sum * reciprocal : sum / divisor;
  }
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// The fp16 loops with F16C's conversion (exact; a signalling NaN comes out
// quiet, a payload difference the contract allows), for x86-64-v3.
GRADWIRE_CPU_V3 void DecodeAccumulateHalfV3(const uint8_t* values, uint64_t n, float* dense) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values + 2 * i)));
    _mm256_storeu_ps(dense + i, _mm256_add_ps(_mm256_loadu_ps(dense + i), v));
  }
  for (; i < n; ++i) dense[i] += HalfFloat(LoadLe<uint16_t>(values + 2 * i));
}

GRADWIRE_CPU_V3 void DecodeAverageHalfV3(const uint8_t* const* values, uint64_t frames, uint64_t n,
                                         float divisor, float* out) {
  float reciprocal;
  const bool multiply = ExactReciprocal(divisor, &reciprocal);
  const __m256 by = _mm256_set1_ps(multiply ? reciprocal : divisor);
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;  // +0
    for (uint64_t r = 0; r < frames; ++r) {
      const __m128i* p = reinterpret_cast<const __m128i*>(values[r] + 2 * i);
      s0 = _mm256_add_ps(s0, _mm256_cvtph_ps(_mm_loadu_si128(p)));
      s1 = _mm256_add_ps(s1, _mm256_cvtph_ps(_mm_loadu_si128(p + 1)));
      s2 = _mm256_add_ps(s2, _mm256_cvtph_ps(_mm_loadu_si128(p + 2)));
      s3 = _mm256_add_ps(s3, _mm256_cvtph_ps(_mm_loadu_si128(p + 3)));
    }
    if (multiply) {
      s0 = _mm256_mul_ps(s0, by), s1 = _mm256_mul_ps(s1, by);
      s2 = _mm256_mul_ps(s2, by), s3 = _mm256_mul_ps(s3, by);
    } else {
      s0 = _mm256_div_ps(s0, by), s1 = _mm256_div_ps(s1, by);
      s2 = _mm256_div_ps(s2, by), s3 = _mm256_div_ps(s3, by);
    }
    _mm256_storeu_ps(out + i, s0);
    _mm256_storeu_ps(out + i + 8, s1);
    _mm256_storeu_ps(out + i + 16, s2);
    _mm256_storeu_ps(out + i + 24, s3);
  }
  for (; i < n; ++i) {
    float sum = 0.0f;
    for (uint64_t r = 0; r < frames; ++r) sum += HalfFloat(LoadLe<uint16_t>(values[r] + 2 * i));
    out[i] = multiply ? sum * reciprocal : sum / divisor;
  }
}
#endif

template <ValueFormat F>
GRADWIRE_CPU_CLONES void DecodeAverageAs(const uint8_t* const* values, uint64_t frames, uint64_t n,
                                         float divisor, float* out) {
  float reciprocal;
  if (ExactReciprocal(divisor, &reciprocal)) {
    AverageLoop<F, true>(values, frames, n, divisor, reciprocal, out);
  } else {
    AverageLoop<F, false>(values, frames, n, divisor, reciprocal, out);
  }
}

// CastCompress's values and residual; returns the non-finite count.
uint64_t CastCompressFormat(const float* grad, float* residual, uint64_t n, ValueFormat format,
                            uint8_t* values) {
  switch (format) {
    case ValueFormat::kFp16:
#if GRADWIRE_CPU_V3_FUNCTIONS
      if (CpuIsX86V3()) {
        return residual != nullptr ? HalfCastV3<true>(grad, residual, n, values)
                                   : HalfCastV3<false>(grad, residual, n, values);
      }
#endif
      return CastCompressAs<ValueFormat::kFp16>(grad, residual, n, values);
    case ValueFormat::kBf16:
      return CastCompressAs<ValueFormat::kBf16>(grad, residual, n, values);
    default:
      return CastCompressAs<ValueFormat::kFp32>(grad, residual, n, values);
  }
}

void SetCastStats(uint64_t n, uint64_t nonfinite, FusedStats* stats) {
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats) {
  SetCastStats(n, CastCompressFormat(grad, residual, n, format, values), stats);
}

void CastCompressInChunks(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats,
                          absl::FunctionRef<void(const uint8_t* chunk, uint64_t bytes)> written) {
  const uint64_t width = ValueWidth(format);
  uint64_t nonfinite = 0;
  for (uint64_t begin = 0; begin < n; begin += kCastChunkElements) {
    const uint64_t len = n - begin < kCastChunkElements ? n - begin : kCastChunkElements;
    nonfinite += CastCompressFormat(grad + begin, residual != nullptr ? residual + begin : nullptr,
                                    len, format, values + width * begin);
    written(values + width * begin, width * len);
  }
  SetCastStats(n, nonfinite, stats);
}

void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  switch (format) {
    case ValueFormat::kFp16:
#if GRADWIRE_CPU_V3_FUNCTIONS
      if (CpuIsX86V3()) {
        DecodeAccumulateHalfV3(values, n, dense);
        break;
      }
#endif
      DecodeAccumulateAs<ValueFormat::kFp16>(values, n, dense);
      break;
    case ValueFormat::kBf16:
      DecodeAccumulateAs<ValueFormat::kBf16>(values, n, dense);
      break;
    default:
      DecodeAccumulateAs<ValueFormat::kFp32>(values, n, dense);
      break;
  }
}

void CastDecodeAverage(const uint8_t* const* values, uint64_t frames, uint64_t n,
                       ValueFormat format, float divisor, float* out) {
  switch (format) {
    case ValueFormat::kFp16:
#if GRADWIRE_CPU_V3_FUNCTIONS
      if (CpuIsX86V3()) {
        DecodeAverageHalfV3(values, frames, n, divisor, out);
        break;
      }
#endif
      DecodeAverageAs<ValueFormat::kFp16>(values, frames, n, divisor, out);
      break;
    case ValueFormat::kBf16:
      DecodeAverageAs<ValueFormat::kBf16>(values, frames, n, divisor, out);
      break;
    default:
      DecodeAverageAs<ValueFormat::kFp32>(values, frames, n, divisor, out);
      break;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
