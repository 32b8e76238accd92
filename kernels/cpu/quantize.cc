#include "gradwire/kernels/cpu/quantize.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/qsgd_encode.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"
#include "gradwire/kernels/cpu/qsgd_packing.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

using qsgd_packing::CodePacker;
using qsgd_packing::CodeUnpacker;
using qsgd_packing::kBlock;

using qsgd_encode::AccumulateBucket;
using qsgd_encode::FinishScale;
using qsgd_encode::MaxFiniteMagnitude;
using qsgd_encode::QsgdBlock;
using qsgd_encode::QsgdBucketByBlocks;
using qsgd_encode::ZeroScaleBucket;

#if GRADWIRE_CPU_V3_FUNCTIONS
// ------------------------------------------------------------ x86-64-v3 --
// QsgdLoop with AVX2 intrinsics. A bucket's codes need its scale, so each
// bucket is read twice, the second time in L1; here the first pass over
// bucket b + 1 (memory-bound: acc = grad + residual, the scale) runs
// interleaved with the second over bucket b (compute-bound: codes and
// residuals, 32 elements a step, the hashes formed in registers), so that
// each hides the other. Every value is the portable loop's: the same IEEE
// operations in the same order (QsgdElement), decoded values from the
// bucket's table (bits <= 4) or QsgdLevelsV3, and in buckets without
// non-finite values and with 2 * scale finite the clamps and the residual's
// finite test are left out, as they cannot change anything there.
#define GRADWIRE_V3_INLINE GRADWIRE_CPU_V3 inline __attribute__((always_inline))

// CodePacker's SixBitPacker: 32 codes (four groups) a step, as
// quantize_qsgd_v4.cc's PackSixBitsV4 at half the width: byte pairs
// c0 + 64 c1 (maddubs), word pairs w0 + 4096 w1 (madd) leave each four
// codes' 24 bits in the low three bytes of a dword; a shuffle within lanes
// and a dword permute bring them together, 24 bytes. The same bytes as
// Compact (code e of a group at bit 6 e).
GRADWIRE_CPU_V3 uint64_t PackSixBitsV3(const uint8_t* codes, uint64_t groups, uint8_t* out) {
  const __m256i pairs = _mm256_set1_epi16(0x4001);      // bytes 1, 64
  const __m256i quads = _mm256_set1_epi32(0x10000001);  // words 1, 4096
  const __m256i squeeze = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                           0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 0, 0);
  uint64_t g = 0;
  for (; g + 4 <= groups; g += 4) {
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 8 * g));
    c = _mm256_madd_epi16(_mm256_maddubs_epi16(c, pairs), quads);
    c = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(c, squeeze), gather);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 6 * g), _mm256_castsi256_si128(c));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 6 * g + 16), _mm256_extracti128_si256(c, 1));
  }
  return g;
}

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
// QsgdLevelsV3 (bits >= 5).
enum DecodedBy { kTable8, kTable16, kLevels };

struct BucketConstants {
  __m256 step, per_unit, half, top, unit, table_lo, table_hi;
  __m256i mix;
};

// What CodeBucketV3 needs, set up once a call (the tables then hold
// QsgdMultipleTable) and completed for each bucket.
GRADWIRE_V3_INLINE void CallConstants(uint32_t bits, const ElementKey& key, BucketConstants* k) {
  const uint32_t max_code = QsgdMaxCode(bits);
  alignas(32) float multiple[16];
  QsgdMultipleTable(bits <= 4 ? bits : 4, multiple);
  k->step = _mm256_setzero_ps();
  k->per_unit = _mm256_setzero_ps();
  k->half = _mm256_set1_ps(0.5f * static_cast<float>(max_code));
  k->top = _mm256_set1_ps(static_cast<float>(max_code));
  k->unit = _mm256_set1_ps(5.9604644775390625e-8f);
  k->table_lo = _mm256_load_ps(multiple);
  k->table_hi = _mm256_load_ps(multiple + 8);
  k->mix = _mm256_set1_epi32(static_cast<int32_t>(key.mix));
}

// Codes (one a byte) and residuals of 32 elements; `x` holds the next
// eight indices' RoundingHashInput, and advances.
template <DecodedBy kDecoded, bool kClean, bool kHasResidual>
GRADWIRE_V3_INLINE void CodeStep(const float* acc, float* res, const BucketConstants& k, __m256i* x,
                                 uint8_t* codes) {
  __m256i c[4];
  for (int q = 0; q < 4; ++q) {
    const __m256 a = _mm256_loadu_ps(acc + 8 * q);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(a, k.per_unit), k.half);
    if (!kClean) {
      t = _mm256_max_ps(t, _mm256_setzero_ps());  // t > 0 ? t : +0 (NaN gives +0)
      t = _mm256_min_ps(t, k.top);                // t < top ? t : top
    }
    const __m256i floor = _mm256_cvttps_epi32(t);
    const __m256 frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(floor));
    const __m256i h = HashRoundV3(_mm256_xor_si256(*x, k.mix));
    *x = _mm256_add_epi32(*x, _mm256_set1_epi32(static_cast<int32_t>(8 * kRoundingStride)));
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
      decoded = QsgdLevelsV3(code, k.top, k.step);
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

// The second pass over a bucket whose grid multiplies (acc, res: its
// first element, global index `first`), with `next`'s first pass
// alongside.
template <DecodedBy kDecoded, bool kClean, bool kHasResidual>
GRADWIRE_CPU_V3 void CodeBucketV3(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, const QsgdGrid& grid, uint32_t bits,
                                  const BucketConstants& call, CodePacker* packer,
                                  FirstPass* next) {
  const uint32_t max_code = QsgdMaxCode(bits);
  BucketConstants k = call;
  k.step = _mm256_set1_ps(grid.step);
  k.per_unit = _mm256_set1_ps(grid.per_unit);
  k.table_lo = _mm256_mul_ps(call.table_lo, k.step);
  k.table_hi = _mm256_mul_ps(call.table_hi, k.step);
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    uint8_t* codes = packer->Slots();
    __m256i x = _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                           _mm256_set1_epi32(static_cast<int32_t>(kRoundingStride))),
        _mm256_set1_epi32(static_cast<int32_t>(RoundingHashInput(key, first + at))));
    uint64_t i = 0;
    for (; i + 32 <= count; i += 32) {
      CodeStep<kDecoded, kClean, kHasResidual>(acc + at + i, res + at + i, k, &x, codes + i);
      if (next->at + 32 <= next->len) {
        for (int q = 0; q < 4; ++q) FirstPassStep(next);
      }
    }
    QsgdBlock<kHasResidual>(acc + at + i, kHasResidual ? res + at + i : nullptr, count - i,
                            first + at + i, key, grid, max_code, codes + i);
    packer->Commit(count);
  }
}

template <bool kClean, bool kHasResidual>
GRADWIRE_CPU_V3 void CodeBucketBy(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, const QsgdGrid& grid, uint32_t bits,
                                  const BucketConstants& call, CodePacker* packer,
                                  FirstPass* next) {
  if (bits <= 3) {
    CodeBucketV3<kTable8, kClean, kHasResidual>(acc, res, len, first, key, grid, bits, call, packer,
                                                next);
  } else if (bits == 4) {
    CodeBucketV3<kTable16, kClean, kHasResidual>(acc, res, len, first, key, grid, bits, call,
                                                 packer, next);
  } else {
    CodeBucketV3<kLevels, kClean, kHasResidual>(acc, res, len, first, key, grid, bits, call, packer,
                                                next);
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
  CodePacker packer(packed, bits, PackSixBitsV3);
  uint64_t nonfinite = 0;
  FirstPass pass;
  StartFirstPass(grad, residual, n < bucket_size ? n : bucket_size, &pass);
  uint64_t bad = 0;
  float scale = FinishFirstPass(&pass, &bad);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    nonfinite += bad;
    // The next bucket's first pass, alongside this one's second.
    const uint64_t next = start + len;
    const uint64_t next_len = n - next < bucket_size ? n - next : bucket_size;
    FirstPass ahead;
    StartFirstPass(grad + next, kHasResidual ? residual + next : nullptr, next_len, &ahead);
    const float* acc = kHasResidual ? residual + start : grad + start;
    float* res = kHasResidual ? residual + start : nullptr;
    const QsgdGrid grid = QsgdGridFor(scale, max_code);
    if (scale > 0.0f && grid.by_division) {
      QsgdBucketByBlocks<kHasResidual>(acc, res, len, start, key, grid, max_code, &packer);
    } else if (scale > 0.0f) {
      // Every acc finite and |acc| <= scale: t lies in [+0, M] unclamped
      // (QsgdGrid), and |residual| <= 2 * scale is finite.
      if (bad == 0 && FloatBits(scale) < 0x7f000000u) {
        CodeBucketBy<true, kHasResidual>(acc, res, len, start, key, grid, bits, call, &packer,
                                         &ahead);
      } else {
        CodeBucketBy<false, kHasResidual>(acc, res, len, start, key, grid, bits, call, &packer,
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

template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t QuantizeLoop(const float* grad, float* residual, uint64_t n,
                                          uint32_t bits, uint32_t bucket_size, uint64_t rounding,
                                          uint8_t* scales, uint8_t* packed) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const ElementKey key = MakeElementKey(rounding, 32);
  CodePacker packer(packed, bits);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = kHasResidual ? residual + start : nullptr;
    const float* acc = AccumulateBucket(grad + start, res, len);
    const float scale = MaxFiniteMagnitude(acc, len, &nonfinite);
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    if (scale > 0.0f) {
      QsgdBucketByBlocks<kHasResidual>(acc, res, len, start, key, QsgdGridFor(scale, max_code),
                                       max_code, &packer);
    } else {
      ZeroScaleBucket(acc, res, len, max_code, &packer);
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

// d[i] += QsgdDequantize(codes[i], scale, m) for i < count, the bucket's
// step (QsgdLevelStep) given.
GRADWIRE_CPU_INLINE void DequantizeAdd(const uint8_t* codes, uint64_t count, float step, uint32_t m,
                                       float* d) {
  for (uint64_t i = 0; i < count; ++i) d[i] += QsgdLevel(codes[i], step, m);
}

// dense[i] += the decoded value of every QSGD code, bucket by bucket.
// 8-bit codes are bytes already and are read in place; other widths are
// unpacked a block at a time.
GRADWIRE_CPU_CLONES void QsgdDecodeLoop(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                        uint32_t bits, uint32_t bucket_size, float* dense) {
  const uint32_t m = QsgdMaxCode(bits);
  CodeUnpacker unpacker(packed, n, bits);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float step = QsgdLevelStep(BitsFloat(LoadLe<uint32_t>(scales + 4 * bucket)), m);
    if (bits == 8) {
      DequantizeAdd(packed + start, len, step, m, dense + start);
      continue;
    }
    for (uint64_t at = 0; at < len; at += kBlock) {
      const uint64_t count = len - at < kBlock ? len - at : kBlock;
      DequantizeAdd(unpacker.Next(count), count, step, m, dense + start + at);
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
  // clang-format would indent the `if` after `#endif` as a continuation.
  // clang-format off
#if GRADWIRE_CPU_V3_FUNCTIONS
#if GRADWIRE_CPU_V4_FUNCTIONS
  if (CpuIsX86V4()) {
    nonfinite = QsgdEncodeV4(grad, residual, n, bits, bucket_size, rounding, scales, packed);
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
  // clang-format on
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
