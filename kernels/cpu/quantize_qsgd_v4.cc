// QsgdCompress's loop on x86-64-v4 (qsgd_encode.h).
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

using qsgd_encode::FinishScale;
using qsgd_encode::QsgdBlock;
using qsgd_encode::QsgdBucketByBlocks;
using qsgd_encode::ZeroScaleBucket;
using qsgd_packing::CodePacker;
using qsgd_packing::kBlock;

#if GRADWIRE_CPU_V4_FUNCTIONS
// ------------------------------------------------------------ x86-64-v4 --
// quantize.cc's QsgdLoopV3 at sixteen lanes: the same two passes interleaved, the same
// IEEE operations in the same order, 64 elements a coding step. One
// permute of a sixteen-entry table decodes every width <= 4; codes become
// bytes by a truncating narrow (they are <= 255).
#define GRADWIRE_V4_INLINE GRADWIRE_CPU_V4 inline __attribute__((always_inline))
GRADWIRE_CPU_V4_BEGIN

// CodePacker's SixBitPacker: 64 codes (eight groups) a step, as base64
// packs: byte pairs c0 + 64 c1 (maddubs), word pairs w0 + 4096 w1 (madd)
// leave each four codes' 24 bits in the low three bytes of a dword, which
// a shuffle within lanes and a dword permute bring together, 48 bytes.
// The same bytes as Compact (code e of a group at bit 6 e). On a Zen 5
// core, cold at 25.6M elements, it took QSGD 6-bit's encode from 19.8 to
// 16.3 ms (8-bit's 16.6): Compact a group at a time had cost a fifth.
GRADWIRE_CPU_V4 uint64_t PackSixBitsV4(const uint8_t* codes, uint64_t groups, uint8_t* out) {
  const __m512i pairs = _mm512_set1_epi16(0x4001);      // bytes 1, 64
  const __m512i quads = _mm512_set1_epi32(0x10000001);  // words 1, 4096
  const __m512i squeeze =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  const __m512i gather = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
  uint64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    __m512i c = _mm512_loadu_si512(codes + 8 * g);
    c = _mm512_madd_epi16(_mm512_maddubs_epi16(c, pairs), quads);
    c = _mm512_permutexvar_epi32(gather, _mm512_shuffle_epi8(c, squeeze));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 6 * g), _mm512_castsi512_si256(c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 6 * g + 32), _mm512_extracti32x4_epi32(c, 2));
  }
  return g;
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
  __m512 step, per_unit, half, top, unit, table;
  ElementKey16 key;  // 32-bit hashes (HashRound16<true>)
};

GRADWIRE_V4_INLINE void CallConstantsV4(uint32_t bits, const ElementKey& key,
                                        BucketConstantsV4* k) {
  const uint32_t max_code = QsgdMaxCode(bits);
  alignas(64) float multiple[16];
  QsgdMultipleTable(bits <= 4 ? bits : 4, multiple);
  k->step = _mm512_setzero_ps();
  k->per_unit = _mm512_setzero_ps();
  k->half = _mm512_set1_ps(0.5f * static_cast<float>(max_code));
  k->top = _mm512_set1_ps(static_cast<float>(max_code));
  k->unit = _mm512_set1_ps(5.9604644775390625e-8f);
  k->table = _mm512_load_ps(multiple);
  k->key = MakeElementKey16(key);
}

// CodeStep of 64 elements; `x` holds the next sixteen indices'
// RoundingHashInput, and advances. kTable: bits <= 4.
template <bool kTable, bool kClean, bool kHasResidual>
GRADWIRE_V4_INLINE void CodeStepV4(const float* acc, float* res, const BucketConstantsV4& k,
                                   __m512i* x, uint8_t* codes) {
  for (int q = 0; q < 4; ++q) {
    const __m512 a = _mm512_loadu_ps(acc + 16 * q);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(a, k.per_unit), k.half);
    if (!kClean) {
      t = _mm512_max_ps(t, _mm512_setzero_ps());  // NaN gives +0, as in v3
      t = _mm512_min_ps(t, k.top);
    }
    const __m512i floor = _mm512_cvttps_epi32(t);
    const __m512 frac = _mm512_sub_ps(t, _mm512_cvtepi32_ps(floor));
    const __m512i h = HashRound16<true>(k.key, _mm512_xor_si512(*x, k.key.mix));
    *x = _mm512_add_epi32(*x, _mm512_set1_epi32(static_cast<int32_t>(16 * kRoundingStride)));
    const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), k.unit);
    const __mmask16 up = _mm512_cmp_ps_mask(u, frac, _CMP_LT_OQ);
    const __m512i code = _mm512_mask_add_epi32(floor, up, floor, _mm512_set1_epi32(1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16 * q), _mm512_cvtepi32_epi8(code));
    if (!kHasResidual) continue;
    const __m512 decoded = kTable ? _mm512_permutexvar_ps(code, k.table)
                                  : QsgdLevelsV4(code, k.top, k.step);
    __m512i r = _mm512_castps_si512(_mm512_sub_ps(a, decoded));
    if (!kClean) {
      const __m512i exponent = _mm512_set1_epi32(0x7f800000);
      r = _mm512_maskz_mov_epi32(_mm512_cmpneq_epi32_mask(_mm512_and_si512(r, exponent), exponent),
                                 r);
    }
    _mm512_storeu_si512(res + 16 * q, r);
  }
}

template <bool kTable, bool kClean, bool kHasResidual>
GRADWIRE_CPU_V4 void CodeBucketV4(const float* acc, float* res, uint64_t len, uint64_t first,
                                  const ElementKey& key, const QsgdGrid& grid, uint32_t bits,
                                  const BucketConstantsV4& call, CodePacker* packer,
                                  FirstPassV4* next) {
  const uint32_t max_code = QsgdMaxCode(bits);
  BucketConstantsV4 k = call;
  k.step = _mm512_set1_ps(grid.step);
  k.per_unit = _mm512_set1_ps(grid.per_unit);
  k.table = _mm512_mul_ps(call.table, k.step);
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    uint8_t* codes = packer->Slots();
    __m512i x = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(static_cast<int32_t>(kRoundingStride))),
        _mm512_set1_epi32(static_cast<int32_t>(RoundingHashInput(key, first + at))));
    uint64_t i = 0;
    for (; i + 64 <= count; i += 64) {
      CodeStepV4<kTable, kClean, kHasResidual>(acc + at + i, res + at + i, k, &x, codes + i);
      if (next->at + 64 <= next->len) {
        for (int q = 0; q < 4; ++q) FirstPassStepV4(next);
      }
    }
    QsgdBlock<kHasResidual>(acc + at + i, kHasResidual ? res + at + i : nullptr, count - i,
                            first + at + i, key, grid, max_code, codes + i);
    packer->Commit(count);
  }
}

template <bool kClean, bool kHasResidual>
GRADWIRE_CPU_V4 void CodeBucketByV4(const float* acc, float* res, uint64_t len, uint64_t first,
                                    const ElementKey& key, const QsgdGrid& grid, uint32_t bits,
                                    const BucketConstantsV4& call, CodePacker* packer,
                                    FirstPassV4* next) {
  if (bits <= 4) {
    CodeBucketV4<true, kClean, kHasResidual>(acc, res, len, first, key, grid, bits, call, packer,
                                             next);
  } else {
    CodeBucketV4<false, kClean, kHasResidual>(acc, res, len, first, key, grid, bits, call, packer,
                                              next);
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
  CodePacker packer(packed, bits, PackSixBitsV4);
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
    const QsgdGrid grid = QsgdGridFor(scale, max_code);
    if (scale > 0.0f && grid.by_division) {
      QsgdBucketByBlocks<kHasResidual>(acc, res, len, start, key, grid, max_code, &packer);
    } else if (scale > 0.0f) {
      if (bad == 0 && FloatBits(scale) < 0x7f000000u) {
        CodeBucketByV4<true, kHasResidual>(acc, res, len, start, key, grid, bits, call, &packer,
                                           &ahead);
      } else {
        CodeBucketByV4<false, kHasResidual>(acc, res, len, start, key, grid, bits, call, &packer,
                                            &ahead);
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

}  // namespace

#if GRADWIRE_CPU_V4_FUNCTIONS
uint64_t QsgdEncodeV4(const float* grad, float* residual, uint64_t n, uint32_t bits,
                      uint32_t bucket_size, uint64_t rounding, uint8_t* scales, uint8_t* packed) {
  return residual != nullptr
             ? QsgdLoopV4<true>(grad, residual, n, bits, bucket_size, rounding, scales, packed)
             : QsgdLoopV4<false>(grad, residual, n, bits, bucket_size, rounding, scales, packed);
}
#endif

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
