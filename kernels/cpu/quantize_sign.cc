// The sign half of quantize.h: EF-signSGD's compress and decode.
//
// Compress makes two passes over each bucket, the second in L1: the first
// forms acc = grad + residual (stored into the residual) and the bucket's
// scale, the second the codes and the new residual, eight lanes at a time
// (GCC vector extensions, so each clone of clones_x86.h gets its own
// width), with 32 codes gathered into one word per step and appended to
// the packed stream. Every step is exact (integer ops, one IEEE subtract
// per element, and a double sum whose order cannot change it, see
// SignScale), so every clone writes the same bits.
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/quantize.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Vectors are loaded and stored with memcpy in place (any alignment), not
// passed to or returned from helpers: that would change the ABI between
// clones (-Wpsabi).
#define GRADWIRE_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define GRADWIRE_STORE(p, v) memcpy((p), &(v), sizeof(v))

GRADWIRE_CPU_INLINE double BitsDouble(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

// Appends bits to a stream, least significant first from bit 0 of out;
// whole 32-bit words are stored as they fill, the last bytes by Finish
// (their unused high bits zero).
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}

  // The low `count` (<= 32) bits of `bits`, whose higher bits are zero.
  GRADWIRE_CPU_INLINE void Put(uint32_t bits, uint32_t count) {
    buffer_ |= static_cast<uint64_t>(bits) << filled_;
    filled_ += count;
    if (filled_ >= 32) {
      StoreLe<uint32_t>(out_, static_cast<uint32_t>(buffer_));
      out_ += 4;
      buffer_ >>= 32;
      filled_ -= 32;
    }
  }

  GRADWIRE_CPU_INLINE void Finish() {
    if (filled_ == 0) return;  // out_ may be null (no elements)
    uint8_t word[8];
    StoreLe<uint64_t>(word, buffer_);
    memcpy(out_, word, (filled_ + 7) / 8);
  }

 private:
  uint8_t* out_;
  uint64_t buffer_ = 0;
  uint32_t filled_ = 0;  // < 32 between calls
};

// The lanes of pass 1 (SignScale) over the first len / 16 * 16 elements:
// acc stored into the residual (if not null), and of the finite |acc| the
// count, the smallest nonzero less one (a zero wraps to the largest value)
// and the sum in double, in any order. Returns how many it covered.
struct Magnitudes {
  uint64_t finite = 0;
  uint32_t min_less_1 = 0xffffffffu;
  double sum = 0.0;
};

template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t SumMagnitudes(const float* grad, float* residual, uint64_t len,
                                           Magnitudes* out) {
  U32x8 min8 = ~U32x8{}, finite8 = {};
  // Four chains (named: GCC keeps them in registers), as a double add's
  // latency is several cycles.
  F64x4 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  uint64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    for (int h = 0; h < 2; ++h) {
      F32x8 a, r;
      GRADWIRE_LOAD(a, grad + i + 8 * h);
      if (kHasResidual) {
        GRADWIRE_LOAD(r, residual + i + 8 * h);
        a += r;
        GRADWIRE_STORE(residual + i + 8 * h, a);
      }
      const U32x8 m = GRADWIRE_BITCAST(U32x8, a) & 0x7fffffffu;
      const U32x8 ok = (U32x8)(m < 0x7f800000u);  // all ones or zero
      finite8 -= ok;
      const U32x8 v = m & ok;
      const U32x8 nz = v - 1;
      min8 = nz < min8 ? nz : min8;
      const F32x8 f = GRADWIRE_BITCAST(F32x8, v);
      const F64x4 lo = __builtin_convertvector(__builtin_shufflevector(f, f, 0, 1, 2, 3), F64x4);
      const F64x4 hi = __builtin_convertvector(__builtin_shufflevector(f, f, 4, 5, 6, 7), F64x4);
      if (h == 0) {
        s0 += lo;
        s1 += hi;
      } else {
        s2 += lo;
        s3 += hi;
      }
    }
  }
  for (int l = 0; l < 8; ++l) {
    out->finite += finite8[l];
    out->min_less_1 = min8[l] < out->min_less_1 ? min8[l] : out->min_less_1;
  }
  for (int l = 0; l < 4; ++l) out->sum += (s0[l] + s1[l]) + (s2[l] + s3[l]);
  return i;
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// SumMagnitudes with AVX2 intrinsics: GCC 12 splits a vector conversion
// of four floats to doubles into halves (vcvtps2pd on xmm, then inserts).
GRADWIRE_CPU_V3 uint64_t SumMagnitudesV3(const float* grad, float* residual, uint64_t len,
                                         Magnitudes* out) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i ones = _mm256_set1_epi32(-1);
  __m256i min8 = ones, finite8 = _mm256_setzero_si256();
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  uint64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    for (int h = 0; h < 2; ++h) {
      __m256 a = _mm256_loadu_ps(grad + i + 8 * h);
      if (residual != nullptr) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(residual + i + 8 * h));
        _mm256_storeu_ps(residual + i + 8 * h, a);
      }
      const __m256i m = _mm256_and_si256(_mm256_castps_si256(a), abs_mask);
      const __m256i ok = _mm256_cmpgt_epi32(inf, m);  // m < 2^31: signed compare
      finite8 = _mm256_sub_epi32(finite8, ok);
      const __m256i v = _mm256_and_si256(m, ok);
      min8 = _mm256_min_epu32(min8, _mm256_add_epi32(v, ones));
      const __m256 f = _mm256_castsi256_ps(v);
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
      if (h == 0) {
        s0 = _mm256_add_pd(s0, lo);
        s1 = _mm256_add_pd(s1, hi);
      } else {
        s2 = _mm256_add_pd(s2, lo);
        s3 = _mm256_add_pd(s3, hi);
      }
    }
  }
  alignas(32) uint32_t fin[8], mins[8];
  alignas(32) double sums[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(fin), finite8);
  _mm256_store_si256(reinterpret_cast<__m256i*>(mins), min8);
  _mm256_store_pd(sums, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  for (int l = 0; l < 8; ++l) {
    out->finite += fin[l];
    out->min_less_1 = mins[l] < out->min_less_1 ? mins[l] : out->min_less_1;
  }
  for (int l = 0; l < 4; ++l) out->sum += sums[l];
  return i;
}
#endif

// Pass 1 of a bucket: acc = grad + residual, stored into the residual
// (kHasResidual; else acc is grad), and the scale: mean |acc| over the
// finite elements, the sum formed in double in index order (0 if none).
// Adds the non-finite count. `v3`: take SumMagnitudesV3.
//
// Every |acc| is a multiple of u, the ulp of the smallest nonzero one
// (2^(e-150) for its biased exponent e, 2^-149 for denormals), and so is
// every partial sum, in any order; below 2^53 u they are all exact, and
// any order gives the one sum. So the lanes add at once, and only when
// that sum comes near 2^53 u (within a factor 2, far beyond its rounding
// error) is it redone in index order.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE float SignScale(const float* grad, float* residual, uint64_t len, bool v3,
                                    uint64_t* nonfinite) {
  const float* acc = kHasResidual ? residual : grad;
  Magnitudes lanes;
  uint64_t i;
#if GRADWIRE_CPU_V3_FUNCTIONS
  if (v3) {
    i = SumMagnitudesV3(grad, kHasResidual ? residual : nullptr, len, &lanes);
  } else {
    i = SumMagnitudes<kHasResidual>(grad, residual, len, &lanes);
  }
#else
  (void)v3;
  i = SumMagnitudes<kHasResidual>(grad, residual, len, &lanes);
#endif
  uint64_t finite = lanes.finite;
  uint32_t min_less_1 = lanes.min_less_1;
  double sum = lanes.sum;
  for (; i < len; ++i) {
    float a = grad[i];
    if (kHasResidual) {
      a += residual[i];
      residual[i] = a;
    }
    const uint32_t m = FloatBits(a) & 0x7fffffffu;
    const bool ok = m < 0x7f800000u;
    finite += ok ? 1u : 0u;
    const uint32_t v = SelectBits(ok, m, 0);
    min_less_1 = v - 1 < min_less_1 ? v - 1 : min_less_1;
    sum += static_cast<double>(BitsFloat(v));
  }
  *nonfinite += len - finite;
  if (finite == 0) return 0.0f;
  if (min_less_1 != 0xffffffffu) {  // else all are zero: the sum is 0, exact
    const uint32_t e = (min_less_1 + 1) >> 23;
    // 2^52 u = 2^(e - 98), e >= 1 (a normal double).
    const double limit = BitsDouble(static_cast<uint64_t>(1023 + (e > 1 ? e : 1) - 98) << 52);
    if (!(sum < limit)) {
      sum = 0.0;
      for (uint64_t j = 0; j < len; ++j) {
        if (IsFinite(acc[j])) sum += AbsF(acc[j]);
      }
    }
  }
  return static_cast<float>(sum / static_cast<double>(finite));
}

// One element of pass 2: its code, and its residual ResidualAfter(acc,
// SignDecode(code, scale)) if kHasResidual (flipping the sign is exact).
template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint32_t SignElement(float a, float* res, uint32_t scale_bits) {
  const uint32_t code = SignCode(a);
  if (kHasResidual) *res = ResidualAfter(a, BitsFloat(scale_bits ^ (code << 31)));
  return code;
}

// Pass 2 of a bucket: codes of acc (1 = negative: a < 0 is false for NaN
// and -0) appended to the stream, and the residuals, 32 elements a step.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void SignCodes(const float* acc, float* res, uint64_t len, float scale,
                                   BitWriter* out) {
  const uint32_t s = FloatBits(scale);
  const U32x8 lane_bit = {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u};
  uint64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    U32x8 word = {};
    for (int q = 0; q < 4; ++q) {
      F32x8 a;
      GRADWIRE_LOAD(a, acc + i + 8 * q);
      const U32x8 negative = (U32x8)(a < 0.0f);  // all ones where the code is 1
      word |= negative & (lane_bit << (8 * q));
      if (kHasResidual) {
        const F32x8 decoded = GRADWIRE_BITCAST(F32x8, (negative & 0x80000000u) ^ s);
        const U32x8 r = GRADWIRE_BITCAST(U32x8, a - decoded);
        const U32x8 finite = (U32x8)((r & 0x7f800000u) != 0x7f800000u);
        const U32x8 kept = r & finite;
        GRADWIRE_STORE(res + i + 8 * q, kept);
      }
    }
    U32x4 w = __builtin_shufflevector(word, word, 0, 1, 2, 3) |
              __builtin_shufflevector(word, word, 4, 5, 6, 7);
    w |= __builtin_shufflevector(w, w, 2, 3, 0, 1);
    w |= __builtin_shufflevector(w, w, 1, 0, 3, 2);
    out->Put(w[0], 32);
  }
  for (; i < len; ++i) out->Put(SignElement<kHasResidual>(acc[i], res + i, s), 1);
}

template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t SignLoop(const float* grad, float* residual, uint64_t n,
                                      uint32_t bucket_size, uint8_t* scales, uint8_t* packed,
                                      bool v3) {
  BitWriter out(packed);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = kHasResidual ? residual + start : nullptr;
    const float scale = SignScale<kHasResidual>(grad + start, res, len, v3, &nonfinite);
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    SignCodes<kHasResidual>(kHasResidual ? res : grad + start, res, len, scale, &out);
  }
  out.Finish();
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t SignCompressLoop(const float* grad, float* residual, uint64_t n,
                                              uint32_t bucket_size, uint8_t* scales,
                                              uint8_t* packed, bool v3) {
  return residual != nullptr ? SignLoop<true>(grad, residual, n, bucket_size, scales, packed, v3)
                             : SignLoop<false>(grad, residual, n, bucket_size, scales, packed, v3);
}

// *d += SignDecode(code, scale) for elements [i, i + 8), i a multiple of
// 8: the scale with its sign bit flipped by each code, the codes one byte.
GRADWIRE_CPU_INLINE void SignDecodeAdd8(const uint8_t* packed, uint64_t i, uint32_t scale_bits,
                                        F32x8* d) {
  const U32x8 to_top = {31u, 30u, 29u, 28u, 27u, 26u, 25u, 24u};
  const U32x8 bits = (U32x8{} + packed[i >> 3]) << to_top;
  *d += GRADWIRE_BITCAST(F32x8, (bits & 0x80000000u) ^ scale_bits);
}

GRADWIRE_CPU_INLINE float SignDecodeOne(const uint8_t* packed, uint64_t i, uint32_t scale_bits) {
  return BitsFloat(scale_bits ^ (((packed[i >> 3] >> (i & 7)) & 1u) << 31));
}

// dense[i] += the decoded value of every code, eight at a time from byte
// boundaries in the middle of a bucket.
GRADWIRE_CPU_CLONES void SignDecodeLoop(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                        uint32_t bucket_size, float* dense) {
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t end = n - start < bucket_size ? n : start + bucket_size;
    const uint32_t s = LoadLe<uint32_t>(scales + 4 * bucket);
    uint64_t i = start;
    for (; i < end && (i & 7) != 0; ++i) dense[i] += SignDecodeOne(packed, i, s);
    for (; i + 8 <= end; i += 8) {
      F32x8 d;
      GRADWIRE_LOAD(d, dense + i);
      SignDecodeAdd8(packed, i, s, &d);
      GRADWIRE_STORE(dense + i, d);
    }
    for (; i < end; ++i) dense[i] += SignDecodeOne(packed, i, s);
  }
}

// out[i] = (((0 + d_0) + d_1) + ...) / divisor, d_r the decoded value of
// frame r's code i (kMultiply: * reciprocal, the same bits).
template <bool kMultiply>
GRADWIRE_CPU_INLINE void SignAverageLoop(const uint8_t* const* scales, const uint8_t* const* packed,
                                         uint64_t frames, uint64_t n, uint32_t bucket_size,
                                         float divisor, float reciprocal, float* out) {
  auto one = [&](uint64_t i, uint64_t bucket) {
    float sum = 0.0f;
    for (uint64_t r = 0; r < frames; ++r) {
      sum += SignDecodeOne(packed[r], i, LoadLe<uint32_t>(scales[r] + 4 * bucket));
    }
    return kMultiply ? sum * reciprocal : sum / divisor;
  };
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t end = n - start < bucket_size ? n : start + bucket_size;
    uint64_t i = start;
    for (; i < end && (i & 7) != 0; ++i) out[i] = one(i, bucket);
    // 32 codes (a word) of each frame a step, in four independent sums:
    // one chain of adds would wait on each add's latency.
    for (; i + 32 <= end; i += 32) {
      // Named, not an array: GCC keeps these in registers.
      F32x8 s0 = {}, s1 = {}, s2 = {}, s3 = {};  // +0, as the zeroed output
      for (uint64_t r = 0; r < frames; ++r) {
        const U32x8 word = U32x8{} + LoadLe<uint32_t>(packed[r] + (i >> 3));
        const uint32_t s = LoadLe<uint32_t>(scales[r] + 4 * bucket);
        // Code 8q + l to bit 31 of lane l of sum q.
        const U32x8 to_top = {31u, 30u, 29u, 28u, 27u, 26u, 25u, 24u};
        s0 += GRADWIRE_BITCAST(F32x8, ((word << to_top) & 0x80000000u) ^ s);
        s1 += GRADWIRE_BITCAST(F32x8, ((word << (to_top - 8u)) & 0x80000000u) ^ s);
        s2 += GRADWIRE_BITCAST(F32x8, ((word << (to_top - 16u)) & 0x80000000u) ^ s);
        s3 += GRADWIRE_BITCAST(F32x8, ((word << (to_top - 24u)) & 0x80000000u) ^ s);
      }
      if (kMultiply) {
        s0 *= reciprocal, s1 *= reciprocal, s2 *= reciprocal, s3 *= reciprocal;
      } else {
        s0 /= divisor, s1 /= divisor, s2 /= divisor, s3 /= divisor;
      }
      GRADWIRE_STORE(out + i, s0);
      GRADWIRE_STORE(out + i + 8, s1);
      GRADWIRE_STORE(out + i + 16, s2);
      GRADWIRE_STORE(out + i + 24, s3);
    }
    for (; i + 8 <= end; i += 8) {
      F32x8 sum = {};
      for (uint64_t r = 0; r < frames; ++r) {
        SignDecodeAdd8(packed[r], i, LoadLe<uint32_t>(scales[r] + 4 * bucket), &sum);
      }
      if (kMultiply) {
        sum *= reciprocal;
      } else {
        sum /= divisor;
      }
      GRADWIRE_STORE(out + i, sum);
    }
    for (; i < end; ++i) out[i] = one(i, bucket);
  }
}

GRADWIRE_CPU_CLONES void SignAverage(const uint8_t* const* scales, const uint8_t* const* packed,
                                     uint64_t frames, uint64_t n, uint32_t bucket_size,
                                     float divisor, float* out) {
  float reciprocal;
  if (ExactReciprocal(divisor, &reciprocal)) {
    SignAverageLoop<true>(scales, packed, frames, n, bucket_size, divisor, reciprocal, out);
  } else {
    SignAverageLoop<false>(scales, packed, frames, n, bucket_size, divisor, reciprocal, out);
  }
}

}  // namespace

void SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                  uint8_t* scales, uint8_t* packed, FusedStats* stats) {
#if GRADWIRE_CPU_V3_FUNCTIONS
  const bool v3 = CpuIsX86V3();
#else
  const bool v3 = false;
#endif
  const uint64_t nonfinite = SignCompressLoop(grad, residual, n, bucket_size, scales, packed, v3);
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                          uint32_t bucket_size, float* dense) {
  SignDecodeLoop(scales, packed, n, bucket_size, dense);
}

void SignDecodeAverage(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bucket_size, float divisor, float* out) {
  SignAverage(scales, packed, frames, n, bucket_size, divisor, out);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
