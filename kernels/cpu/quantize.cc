#include "gradwire/kernels/cpu/quantize.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"
#include "gradwire/kernels/cpu/qsgd_packing.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

using qsgd_packing::CodePacker;
using qsgd_packing::CodeUnpacker;
using qsgd_packing::kBlock;

// Makes acc = grad + residual for one bucket, stored in the residual (or
// just grad without one); returns where acc lives.
GRADWIRE_CPU_INLINE const float* AccumulateBucket(const float* grad, float* residual,
                                                  uint64_t len) {
  if (residual == nullptr) return grad;
  for (uint64_t i = 0; i < len; ++i) residual[i] = grad[i] + residual[i];
  return residual;
}

// QSGD's scale: the largest finite |acc| (as bits: for floats >= +0 the
// integer order is the numeric order). Counts the non-finite.
GRADWIRE_CPU_INLINE float MaxFiniteMagnitude(const float* acc, uint64_t len, uint64_t* nonfinite) {
  uint32_t max = 0, bad = 0;
  for (uint64_t i = 0; i < len; ++i) {
    const uint32_t m = FloatBits(acc[i]) & 0x7fffffffu;
    const bool finite = m < 0x7f800000u;
    bad += finite ? 0u : 1u;
    const uint32_t v = SelectBits(finite, m, 0);
    max = v > max ? v : max;
  }
  *nonfinite += bad;
  return BitsFloat(max);
}

// One element of QsgdBlock: its code (QsgdQuantize, branch-free) and, if
// res is not null, its residual; `hash` is ElementHash of its index.
GRADWIRE_CPU_INLINE uint32_t QsgdElement(float a, uint32_t hash, float scale, float top, float half,
                                         const QsgdLevelCoefficients& levels, int32_t m,
                                         float* res) {
  // UnitFloat: the hash's top 24 bits, exact as an int32 too.
  const float u = static_cast<float>(static_cast<int32_t>(hash >> 8)) * 5.9604644775390625e-8f;
  // The position on the level grid, clamped to [0, M]: NaN and t <= 0
  // give code 0, t >= M gives M (its frac is 0).
  float t = MulRn(a / scale + 1.0f, half);
  t = t > 0.0f ? t : 0.0f;
  t = t < top ? t : top;
  const int32_t lo = static_cast<int32_t>(t);
  const float frac = t - static_cast<float>(lo);
  const uint32_t code = static_cast<uint32_t>(lo) + (u < frac ? 1u : 0u);
  // QsgdDequantize without a lookup or a division (qsgd_levels.h).
  const float level = QsgdLevelOf(static_cast<int32_t>(2 * code) - m, levels);
  if (res != nullptr) *res = ResidualAfter(a, MulRn(level, scale));
  return code;
}

// Codes and residuals of count <= kBlock elements of one QSGD bucket
// whose scale is > 0, the first at global index `first`; `rounding` is
// the stream key of RoundingKey.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void QsgdBlock(const float* acc, float* res, uint64_t count, uint64_t first,
                                   uint64_t rounding, float scale, uint32_t max_code,
                                   uint8_t* codes) {
  uint32_t hash[kBlock];
  HashRun<true>(MakeElementKey(rounding, 32), first, count, hash);
  const float top = static_cast<float>(max_code);
  const float half = 0.5f * top;
  const int32_t m = static_cast<int32_t>(max_code);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  for (uint64_t i = 0; i < count; ++i) {
    codes[i] = static_cast<uint8_t>(QsgdElement(acc[i], hash[i], scale, top, half, levels, m,
                                                kHasResidual ? res + i : nullptr));
  }
}

// A bucket with nothing finite and nonzero: QsgdQuantize's middle code,
// which decodes to +0.
GRADWIRE_CPU_INLINE void ZeroScaleBlock(const float* acc, float* res, uint64_t count,
                                        uint32_t max_code, uint8_t* codes) {
  memset(codes, static_cast<int>((max_code + 1) / 2), count);
  if (res == nullptr) return;
  for (uint64_t i = 0; i < count; ++i) res[i] = ResidualAfter(acc[i], 0.0f);
}

// The end of a vector first pass over a bucket of len elements (grad,
// residual as in AccumulateBucket) whose first `at` are accumulated with
// `top` their largest |acc| as bits (a NaN or Inf included): the rest
// accumulated, and the scale (MaxFiniteMagnitude) returned, its
// non-finite count added. Only where `top` is not finite is the bucket
// read again.
GRADWIRE_CPU_INLINE float FinishScale(const float* grad, float* residual, uint64_t len,
                                      uint64_t at, uint32_t top, uint64_t* nonfinite) {
  const float* acc = residual == nullptr ? grad : residual;
  AccumulateBucket(grad + at, residual == nullptr ? nullptr : residual + at, len - at);
  if (top < 0x7f800000u) {
    // Everything so far finite: the tail's finite maximum and count.
    const uint32_t tail = FloatBits(MaxFiniteMagnitude(acc + at, len - at, nonfinite));
    return BitsFloat(tail > top ? tail : top);
  }
  return MaxFiniteMagnitude(acc, len, nonfinite);
}

// A bucket with nothing finite and nonzero, block by block into the packer.
GRADWIRE_CPU_INLINE void ZeroScaleBucket(const float* acc, float* res, uint64_t len,
                                         uint32_t max_code, CodePacker* packer) {
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    ZeroScaleBlock(acc + at, res == nullptr ? nullptr : res + at, count, max_code,
                   packer->Slots());
    packer->Commit(count);
  }
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// ------------------------------------------------------------ x86-64-v3 --
// QsgdLoop with AVX2 intrinsics. A bucket's codes need its scale, so each
// bucket is read twice, the second time in L1; here the first pass over
// bucket b + 1 (memory-bound: acc = grad + residual, the scale) runs
// interleaved with the second over bucket b (compute-bound: codes and
// residuals, 32 elements a step, the hashes formed in registers), so that
// each hides the other. Every value is the portable loop's: the same IEEE
// operations in the same order (QsgdElement), decoded values from the
// bucket's table (bits <= 4) or QsgdLevelOf, and in buckets without
// non-finite values and with 2 * scale finite the clamps and the residual's
// finite test are left out, as they cannot change anything there.
#define GRADWIRE_V3_INLINE GRADWIRE_CPU_V3 inline __attribute__((always_inline))

GRADWIRE_V3_INLINE __m256i HashRoundV3(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int32_t>(kHashMul1)));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int32_t>(kHashMul2)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// The first pass over one bucket, taken in steps: acc = grad + residual
// stored into the residual (if not null) and the largest |acc| as bits,
// a NaN or Inf included; only where that is not finite is the bucket read
// again for its largest finite |acc| and its non-finite count.
struct FirstPass {
  const float* grad;
  float* residual;
  uint64_t len;
  uint64_t at;
  __m256i max;
};

GRADWIRE_V3_INLINE void StartFirstPass(const float* grad, float* residual, uint64_t len,
                                       FirstPass* p) {
  p->grad = grad;
  p->residual = residual;
  p->len = len;
  p->at = 0;
  p->max = _mm256_setzero_si256();
}

// Elements [at, at + 8) of the pass.
GRADWIRE_V3_INLINE void FirstPassStep(FirstPass* p) {
  const uint64_t i = p->at;
  __m256 a = _mm256_loadu_ps(p->grad + i);
  if (p->residual != nullptr) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(p->residual + i));
    _mm256_storeu_ps(p->residual + i, a);
  }
  const __m256i m = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7fffffff));
  p->max = _mm256_max_epu32(p->max, m);
  p->at = i + 8;
}

// The rest of the pass; returns the scale (MaxFiniteMagnitude) and adds
// the non-finite count.
GRADWIRE_V3_INLINE float FinishFirstPass(FirstPass* p, uint64_t* nonfinite) {
  while (p->at + 8 <= p->len) FirstPassStep(p);
  alignas(32) uint32_t max[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(max), p->max);
  uint32_t top = 0;
  for (int l = 0; l < 8; ++l) top = max[l] > top ? max[l] : top;
  return FinishScale(p->grad, p->residual, p->len, p->at, top, nonfinite);
}

// Decoded values: a permute of one table (bits <= 3), of two (bits 4), or
// QsgdLevelOf times the scale (bits >= 5).
enum DecodedBy { kTable8, kTable16, kLevels };

struct BucketConstants {
  __m256 scale, one, half, top, unit, table_lo, table_hi, hi, lo;
  __m256i mix;
};

// What CodeBucketV3 needs, set up once a call (the tables then hold
// QsgdUnitTable) and completed for each bucket.
GRADWIRE_V3_INLINE void CallConstants(uint32_t bits, const ElementKey& key, BucketConstants* k) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  alignas(32) float unit[16];
  QsgdUnitTable(bits <= 4 ? bits : 4, unit);
  k->scale = _mm256_setzero_ps();
  k->one = _mm256_set1_ps(1.0f);
  k->half = _mm256_set1_ps(0.5f * static_cast<float>(max_code));
  k->top = _mm256_set1_ps(static_cast<float>(max_code));
  k->unit = _mm256_set1_ps(5.9604644775390625e-8f);
  k->table_lo = _mm256_load_ps(unit);
  k->table_hi = _mm256_load_ps(unit + 8);
  k->hi = _mm256_set1_ps(levels.hi);
  k->lo = _mm256_set1_ps(levels.lo);
  k->mix = _mm256_set1_epi32(static_cast<int32_t>(key.mix));
}

// Codes (one a byte) and residuals of 32 elements; `x` holds the next
// eight indices plus key.add, and advances.
template <DecodedBy kDecoded, bool kClean, bool kHasResidual>
GRADWIRE_V3_INLINE void CodeStep(const float* acc, float* res, const BucketConstants& k, __m256i* x,
                                 uint8_t* codes) {
  __m256i c[4];
  for (int q = 0; q < 4; ++q) {
    const __m256 a = _mm256_loadu_ps(acc + 8 * q);
    __m256 t = _mm256_mul_ps(_mm256_add_ps(_mm256_div_ps(a, k.scale), k.one), k.half);
    if (!kClean) {
      t = _mm256_max_ps(t, _mm256_setzero_ps());  // t > 0 ? t : +0 (NaN gives +0)
      t = _mm256_min_ps(t, k.top);                // t < top ? t : top
    }
    const __m256i floor = _mm256_cvttps_epi32(t);
    const __m256 frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(floor));
    __m256i h = HashRoundV3(*x);
    h = HashRoundV3(_mm256_xor_si256(h, k.mix));
    *x = _mm256_add_epi32(*x, _mm256_set1_epi32(8));
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), k.unit);
    const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, frac, _CMP_LT_OQ));
    const __m256i code = _mm256_sub_epi32(floor, up);
    c[q] = code;
    if (!kHasResidual) continue;
    __m256 decoded;
    if (kDecoded == kTable8) {
      decoded = _mm256_permutevar8x32_ps(k.table_lo, code);
    } else if (kDecoded == kTable16) {
      // The permute reads the low three bits; bit 3 picks the half.
      decoded = _mm256_blendv_ps(_mm256_permutevar8x32_ps(k.table_lo, code),
                                 _mm256_permutevar8x32_ps(k.table_hi, code),
                                 _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));
    } else {
      decoded = _mm256_mul_ps(QsgdLevelsV3(code, k.top, k.hi, k.lo), k.scale);
    }
    __m256i r = _mm256_castps_si256(_mm256_sub_ps(a, decoded));
    if (!kClean) {
      const __m256i exponent = _mm256_set1_epi32(0x7f800000);
      r = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(r, exponent), exponent), r);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(res + 8 * q), r);
  }
  // Codes 0..255 to bytes: the packs interleave 128-bit halves, the
  // permute puts the four-byte groups back in order.
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(codes),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The second pass over a bucket whose scale is > 0 (acc, res: its first
// element, global index `first`), with `next`'s first pass alongside.
template <DecodedBy kDecoded, bool kClean, bool kHasResidual>
GRADWIRE_CPU_V3 void CodeBucketV3(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, float scale, uint32_t bits,
                                  const BucketConstants& call, CodePacker* packer,
                                  FirstPass* next) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const float top = static_cast<float>(max_code);
  const float half = 0.5f * top;
  const int32_t m = static_cast<int32_t>(max_code);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  BucketConstants k = call;
  k.scale = _mm256_set1_ps(scale);
  k.table_lo = _mm256_mul_ps(call.table_lo, k.scale);
  k.table_hi = _mm256_mul_ps(call.table_hi, k.scale);
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    uint8_t* codes = packer->Slots();
    __m256i x = _mm256_add_epi32(
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first + at) + key.add)));
    uint64_t i = 0;
    for (; i + 32 <= count; i += 32) {
      CodeStep<kDecoded, kClean, kHasResidual>(acc + at + i, res + at + i, k, &x, codes + i);
      if (next->at + 32 <= next->len) {
        for (int q = 0; q < 4; ++q) FirstPassStep(next);
      }
    }
    for (; i < count; ++i) {
      codes[i] = static_cast<uint8_t>(QsgdElement(acc[at + i], ElementHash(key, first + at + i),
                                                  scale, top, half, levels, m,
                                                  kHasResidual ? res + at + i : nullptr));
    }
    packer->Commit(count);
  }
}

template <bool kClean, bool kHasResidual>
GRADWIRE_CPU_V3 void CodeBucketBy(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, float scale, uint32_t bits,
                                  const BucketConstants& call, CodePacker* packer,
                                  FirstPass* next) {
  if (bits <= 3) {
    CodeBucketV3<kTable8, kClean, kHasResidual>(acc, res, len, first, key, scale, bits, call,
                                                packer, next);
  } else if (bits == 4) {
    CodeBucketV3<kTable16, kClean, kHasResidual>(acc, res, len, first, key, scale, bits, call,
                                                 packer, next);
  } else {
    CodeBucketV3<kLevels, kClean, kHasResidual>(acc, res, len, first, key, scale, bits, call,
                                                packer, next);
  }
}

template <bool kHasResidual>
GRADWIRE_CPU_V3 uint64_t QsgdLoopV3(const float* grad, float* residual, uint64_t n, uint32_t bits,
                                    uint32_t bucket_size, uint64_t rounding, uint8_t* scales,
                                    uint8_t* packed) {
  const ElementKey key = MakeElementKey(rounding, 32);
  const uint32_t max_code = QsgdMaxCode(bits);
  BucketConstants call;
  CallConstants(bits, key, &call);
  CodePacker packer(packed, bits);
  uint64_t nonfinite = 0;
  FirstPass pass;
  StartFirstPass(grad, residual, n < bucket_size ? n : bucket_size, &pass);
  uint64_t bad = 0;
  float scale = FinishFirstPass(&pass, &bad);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    PrefetchBucketAhead<2>(grad, kHasResidual ? residual : nullptr, start, len, n);
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    nonfinite += bad;
    // The next bucket's first pass, alongside this one's second.
    const uint64_t next = start + len;
    const uint64_t next_len = n - next < bucket_size ? n - next : bucket_size;
    FirstPass ahead;
    StartFirstPass(grad + next, kHasResidual ? residual + next : nullptr, next_len, &ahead);
    const float* acc = kHasResidual ? residual + start : grad + start;
    float* res = kHasResidual ? residual + start : nullptr;
    if (scale > 0.0f) {
      // Every acc finite and |acc| <= scale: t lies in [+0, M] unclamped,
      // and |residual| <= 2 * scale is finite.
      if (bad == 0 && FloatBits(scale) < 0x7f000000u) {
        CodeBucketBy<true, kHasResidual>(acc, res, len, start, key, scale, bits, call, &packer,
                                         &ahead);
      } else {
        CodeBucketBy<false, kHasResidual>(acc, res, len, start, key, scale, bits, call, &packer,
                                          &ahead);
      }
    } else {
      ZeroScaleBucket(acc, res, len, max_code, &packer);
    }
    bad = 0;
    scale = FinishFirstPass(&ahead, &bad);
  }
  packer.Finish();
  return nonfinite;
}
#undef GRADWIRE_V3_INLINE
#endif

#if GRADWIRE_CPU_V4_FUNCTIONS
// ------------------------------------------------------------ x86-64-v4 --
// QsgdLoopV3 at sixteen lanes: the same two passes interleaved, the same
// IEEE operations in the same order, 64 elements a coding step, and no
// software prefetch (on a Zen 5 core, with caches cold, the v3 loop's
// prefetch into L2 made it 15-30 % slower: docs/results/
// 2026-11-28-qsgd-avx512.md). One
// permute of a sixteen-entry table decodes every width <= 4; codes become
// bytes by a truncating narrow (they are <= 255).
#define GRADWIRE_V4_INLINE GRADWIRE_CPU_V4 inline __attribute__((always_inline))
GRADWIRE_CPU_V4_BEGIN

GRADWIRE_V4_INLINE __m512i HashRoundV4(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int32_t>(kHashMul1)));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int32_t>(kHashMul2)));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// FirstPass of QsgdLoopV3, sixteen elements a step.
struct FirstPassV4 {
  const float* grad;
  float* residual;
  uint64_t len;
  uint64_t at;
  __m512i max;
};

GRADWIRE_V4_INLINE void StartFirstPassV4(const float* grad, float* residual, uint64_t len,
                                         FirstPassV4* p) {
  p->grad = grad;
  p->residual = residual;
  p->len = len;
  p->at = 0;
  p->max = _mm512_setzero_si512();
}

GRADWIRE_V4_INLINE void FirstPassStepV4(FirstPassV4* p) {
  const uint64_t i = p->at;
  __m512 a = _mm512_loadu_ps(p->grad + i);
  if (p->residual != nullptr) {
    a = _mm512_add_ps(a, _mm512_loadu_ps(p->residual + i));
    _mm512_storeu_ps(p->residual + i, a);
  }
  const __m512i m = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff));
  p->max = _mm512_max_epu32(p->max, m);
  p->at = i + 16;
}

GRADWIRE_V4_INLINE float FinishFirstPassV4(FirstPassV4* p, uint64_t* nonfinite) {
  while (p->at + 16 <= p->len) FirstPassStepV4(p);
  alignas(64) uint32_t max[16];
  _mm512_store_si512(max, p->max);
  uint32_t top = 0;
  for (int l = 0; l < 16; ++l) top = max[l] > top ? max[l] : top;
  return FinishScale(p->grad, p->residual, p->len, p->at, top, nonfinite);
}

struct BucketConstantsV4 {
  __m512 scale, one, half, top, unit, table, hi, lo;
  __m512i mix;
};

GRADWIRE_V4_INLINE void CallConstantsV4(uint32_t bits, const ElementKey& key,
                                        BucketConstantsV4* k) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  alignas(64) float unit[16];
  QsgdUnitTable(bits <= 4 ? bits : 4, unit);
  k->scale = _mm512_setzero_ps();
  k->one = _mm512_set1_ps(1.0f);
  k->half = _mm512_set1_ps(0.5f * static_cast<float>(max_code));
  k->top = _mm512_set1_ps(static_cast<float>(max_code));
  k->unit = _mm512_set1_ps(5.9604644775390625e-8f);
  k->table = _mm512_load_ps(unit);
  k->hi = _mm512_set1_ps(levels.hi);
  k->lo = _mm512_set1_ps(levels.lo);
  k->mix = _mm512_set1_epi32(static_cast<int32_t>(key.mix));
}

// CodeStep of 64 elements; `x` holds the next sixteen indices plus
// key.add, and advances. kTable: bits <= 4.
template <bool kTable, bool kClean, bool kHasResidual>
GRADWIRE_V4_INLINE void CodeStepV4(const float* acc, float* res, const BucketConstantsV4& k,
                                   __m512i* x, uint8_t* codes) {
  for (int q = 0; q < 4; ++q) {
    const __m512 a = _mm512_loadu_ps(acc + 16 * q);
    __m512 t = _mm512_mul_ps(_mm512_add_ps(_mm512_div_ps(a, k.scale), k.one), k.half);
    if (!kClean) {
      t = _mm512_max_ps(t, _mm512_setzero_ps());  // NaN gives +0, as in v3
      t = _mm512_min_ps(t, k.top);
    }
    const __m512i floor = _mm512_cvttps_epi32(t);
    const __m512 frac = _mm512_sub_ps(t, _mm512_cvtepi32_ps(floor));
    __m512i h = HashRoundV4(*x);
    h = HashRoundV4(_mm512_xor_si512(h, k.mix));
    *x = _mm512_add_epi32(*x, _mm512_set1_epi32(16));
    const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), k.unit);
    const __mmask16 up = _mm512_cmp_ps_mask(u, frac, _CMP_LT_OQ);
    const __m512i code = _mm512_mask_add_epi32(floor, up, floor, _mm512_set1_epi32(1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16 * q), _mm512_cvtepi32_epi8(code));
    if (!kHasResidual) continue;
    const __m512 decoded = kTable ? _mm512_permutexvar_ps(code, k.table)
                                  : _mm512_mul_ps(QsgdLevelsV4(code, k.top, k.hi, k.lo), k.scale);
    __m512i r = _mm512_castps_si512(_mm512_sub_ps(a, decoded));
    if (!kClean) {
      const __m512i exponent = _mm512_set1_epi32(0x7f800000);
      r = _mm512_maskz_mov_epi32(
          _mm512_cmpneq_epi32_mask(_mm512_and_si512(r, exponent), exponent), r);
    }
    _mm512_storeu_si512(res + 16 * q, r);
  }
}

template <bool kTable, bool kClean, bool kHasResidual>
GRADWIRE_CPU_V4 void CodeBucketV4(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, float scale, uint32_t bits,
                                  const BucketConstantsV4& call, CodePacker* packer,
                                  FirstPassV4* next) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const float top = static_cast<float>(max_code);
  const float half = 0.5f * top;
  const int32_t m = static_cast<int32_t>(max_code);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  BucketConstantsV4 k = call;
  k.scale = _mm512_set1_ps(scale);
  k.table = _mm512_mul_ps(call.table, k.scale);
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    uint8_t* codes = packer->Slots();
    __m512i x = _mm512_add_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first + at) + key.add)));
    uint64_t i = 0;
    for (; i + 64 <= count; i += 64) {
      CodeStepV4<kTable, kClean, kHasResidual>(acc + at + i, res + at + i, k, &x, codes + i);
      if (next->at + 64 <= next->len) {
        for (int q = 0; q < 4; ++q) FirstPassStepV4(next);
      }
    }
    for (; i < count; ++i) {
      codes[i] = static_cast<uint8_t>(QsgdElement(acc[at + i], ElementHash(key, first + at + i),
                                                  scale, top, half, levels, m,
                                                  kHasResidual ? res + at + i : nullptr));
    }
    packer->Commit(count);
  }
}

template <bool kClean, bool kHasResidual>
GRADWIRE_CPU_V4 void CodeBucketByV4(const float* acc, float* res, uint64_t len, uint64_t first,
                                    const ElementKey& key, float scale, uint32_t bits,
                                    const BucketConstantsV4& call, CodePacker* packer,
                                    FirstPassV4* next) {
  if (bits <= 4) {
    CodeBucketV4<true, kClean, kHasResidual>(acc, res, len, first, key, scale, bits, call, packer,
                                             next);
  } else {
    CodeBucketV4<false, kClean, kHasResidual>(acc, res, len, first, key, scale, bits, call,
                                              packer, next);
  }
}

template <bool kHasResidual>
GRADWIRE_CPU_V4 uint64_t QsgdLoopV4(const float* grad, float* residual, uint64_t n, uint32_t bits,
                                    uint32_t bucket_size, uint64_t rounding, uint8_t* scales,
                                    uint8_t* packed) {
  const ElementKey key = MakeElementKey(rounding, 32);
  const uint32_t max_code = QsgdMaxCode(bits);
  BucketConstantsV4 call;
  CallConstantsV4(bits, key, &call);
  CodePacker packer(packed, bits);
  uint64_t nonfinite = 0;
  FirstPassV4 pass;
  StartFirstPassV4(grad, residual, n < bucket_size ? n : bucket_size, &pass);
  uint64_t bad = 0;
  float scale = FinishFirstPassV4(&pass, &bad);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    nonfinite += bad;
    const uint64_t next = start + len;
    const uint64_t next_len = n - next < bucket_size ? n - next : bucket_size;
    FirstPassV4 ahead;
    StartFirstPassV4(grad + next, kHasResidual ? residual + next : nullptr, next_len, &ahead);
    const float* acc = kHasResidual ? residual + start : grad + start;
    float* res = kHasResidual ? residual + start : nullptr;
    if (scale > 0.0f) {
      if (bad == 0 && FloatBits(scale) < 0x7f000000u) {
        CodeBucketByV4<true, kHasResidual>(acc, res, len, start, key, scale, bits, call, &packer,
                                           &ahead);
      } else {
        CodeBucketByV4<false, kHasResidual>(acc, res, len, start, key, scale, bits, call,
                                            &packer, &ahead);
      }
    } else {
      ZeroScaleBucket(acc, res, len, max_code, &packer);
    }
    bad = 0;
    scale = FinishFirstPassV4(&ahead, &bad);
  }
  packer.Finish();
  return nonfinite;
}
GRADWIRE_CPU_V4_END
#undef GRADWIRE_V4_INLINE
#endif

template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t QuantizeLoop(const float* grad, float* residual, uint64_t n,
                                          uint32_t bits, uint32_t bucket_size, uint64_t rounding,
                                          uint8_t* scales, uint8_t* packed) {
  const uint32_t max_code = QsgdMaxCode(bits);
  CodePacker packer(packed, bits);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = kHasResidual ? residual + start : nullptr;
    PrefetchBucketAhead(grad, kHasResidual ? residual : nullptr, start, len, n);
    const float* acc = AccumulateBucket(grad + start, res, len);
    const float scale = MaxFiniteMagnitude(acc, len, &nonfinite);
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    for (uint64_t at = 0; at < len; at += kBlock) {
      const uint64_t count = len - at < kBlock ? len - at : kBlock;
      float* r = kHasResidual ? res + at : nullptr;
      if (scale > 0.0f) {
        QsgdBlock<kHasResidual>(acc + at, r, count, start + at, rounding, scale, max_code,
                                packer.Slots());
      } else {
        ZeroScaleBlock(acc + at, r, count, max_code, packer.Slots());
      }
      packer.Commit(count);
    }
  }
  packer.Finish();
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t QsgdLoop(const float* grad, float* residual, uint64_t n, uint32_t bits,
                                      uint32_t bucket_size, uint64_t rounding, uint8_t* scales,
                                      uint8_t* packed) {
  return residual != nullptr
             ? QuantizeLoop<true>(grad, residual, n, bits, bucket_size, rounding, scales, packed)
             : QuantizeLoop<false>(grad, residual, n, bits, bucket_size, rounding, scales, packed);
}

// d[i] += QsgdDequantize(codes[i], scale, m) for i < count; the level as
// QsgdBlock computes it.
GRADWIRE_CPU_INLINE void DequantizeAdd(const uint8_t* codes, uint64_t count, float scale, int32_t m,
                                       const QsgdLevelCoefficients& levels, float* d) {
  for (uint64_t i = 0; i < count; ++i) {
    d[i] += MulRn(QsgdLevelOf(static_cast<int32_t>(2 * codes[i]) - m, levels), scale);
  }
}

// dense[i] += the decoded value of every QSGD code, bucket by bucket.
// 8-bit codes are bytes already and are read in place; other widths are
// unpacked a block at a time.
GRADWIRE_CPU_CLONES void QsgdDecodeLoop(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                        uint32_t bits, uint32_t bucket_size, float* dense) {
  const int32_t m = static_cast<int32_t>(QsgdMaxCode(bits));
  const QsgdLevelCoefficients levels = QsgdLevelsFor(QsgdMaxCode(bits));
  CodeUnpacker unpacker(packed, n, bits);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float scale = BitsFloat(LoadLe<uint32_t>(scales + 4 * bucket));
    if (bits == 8) {
      DequantizeAdd(packed + start, len, scale, m, levels, dense + start);
      continue;
    }
    for (uint64_t at = 0; at < len; at += kBlock) {
      const uint64_t count = len - at < kBlock ? len - at : kBlock;
      DequantizeAdd(unpacker.Next(count), count, scale, m, levels, dense + start + at);
    }
  }
}

// QsgdDecodeLoop for 1, 2 or 4 bits and buckets of a multiple of 8
// elements: each bucket's at most 16 decoded values are tabulated (the
// same products), and eight codes at a time are cut from one word of the
// stream by per-lane shifts and looked up in two vectors by a permute.
GRADWIRE_CPU_CLONES void QsgdDecodeTable(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                         uint32_t bits, uint32_t bucket_size, float* dense) {
  const U32x8 shift = U32x8{0, 1, 2, 3, 4, 5, 6, 7} * bits;
  const uint32_t mask = (1u << bits) - 1;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float scale = BitsFloat(LoadLe<uint32_t>(scales + 4 * bucket));
    float table[16];
    QsgdDecodedTable(bits, scale, table);
    F32x8 low, high;
    memcpy(&low, table, sizeof low);
    memcpy(&high, table + 8, sizeof high);
    const uint8_t* p = packed + start * bits / 8;  // a whole byte: start % 8 == 0
    float* d = dense + start;
    uint64_t i = 0;
    for (; i + 8 <= len; i += 8, p += bits) {
      // Eight codes: `bits` bytes.
      const uint32_t word = bits == 4   ? LoadLe<uint32_t>(p)
                            : bits == 2 ? LoadLe<uint16_t>(p)
                                        : p[0];
      const I32x8 code = (I32x8)(((U32x8{} + word) >> shift) & mask);
      F32x8 v;
      memcpy(&v, d + i, sizeof v);
      v += __builtin_shuffle(low, high, code);
      memcpy(d + i, &v, sizeof v);
    }
    for (; i < len; ++i) {
      const uint32_t q = ReadPackedCode(packed, start + i, bits);
      d[i] += table[q];
    }
  }
}

}  // namespace

void QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                  uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                  uint8_t* packed, FusedStats* stats) {
  const uint64_t rounding = StreamKey(seed, step, kStreamRounding);
  uint64_t nonfinite;
#if GRADWIRE_CPU_V3_FUNCTIONS
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (CpuIsX86V4()) {
    nonfinite =
        residual != nullptr
            ? QsgdLoopV4<true>(grad, residual, n, bits, bucket_size, rounding, scales, packed)
            : QsgdLoopV4<false>(grad, residual, n, bits, bucket_size, rounding, scales, packed);
  } else
#endif
  if (CpuIsX86V3()) {
    nonfinite =
        residual != nullptr
            ? QsgdLoopV3<true>(grad, residual, n, bits, bucket_size, rounding, scales, packed)
            : QsgdLoopV3<false>(grad, residual, n, bits, bucket_size, rounding, scales, packed);
  } else {
    nonfinite = QsgdLoop(grad, residual, n, bits, bucket_size, rounding, scales, packed);
  }
#else
  nonfinite = QsgdLoop(grad, residual, n, bits, bucket_size, rounding, scales, packed);
#endif
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, float* dense) {
  if ((bits == 1 || bits == 2 || bits == 4) && bucket_size % 8 == 0) {
    QsgdDecodeTable(scales, packed, n, bits, bucket_size, dense);
  } else {
    QsgdDecodeLoop(scales, packed, n, bits, bucket_size, dense);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
