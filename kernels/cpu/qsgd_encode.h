// QSGD's encode with error feedback, the pieces every loop shares
// (quantize.cc: the portable and x86-64-v3 loops; quantize_qsgd_v4.cc:
// the x86-64-v4 loop), and the x86-64-v4 loop's entry.
#ifndef GRADWIRE_KERNELS_CPU_QSGD_ENCODE_H_
#define GRADWIRE_KERNELS_CPU_QSGD_ENCODE_H_

#include <stdint.h>
#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"
#include "gradwire/kernels/cpu/qsgd_packing.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace qsgd_encode {

using qsgd_packing::CodePacker;
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

// One element of QsgdBlock: its code (QsgdQuantize, branch-free but for
// the grid's fallback) and, if res is not null, its residual; `hash` is
// RoundingHash of its index.
GRADWIRE_CPU_INLINE uint32_t QsgdElement(float a, uint32_t hash, const QsgdGrid& grid, float top,
                                         uint32_t max_code, float* res) {
  // UnitFloat: the hash's top 24 bits, exact as an int32 too.
  const float u = static_cast<float>(static_cast<int32_t>(hash >> 8)) * 5.9604644775390625e-8f;
  // The position on the level grid, clamped to [0, M]: NaN and t <= 0
  // give code 0, t >= M gives M (its frac is 0).
  float t = QsgdPosition(a, grid);
  t = t > 0.0f ? t : 0.0f;
  t = t < top ? t : top;
  const int32_t lo = static_cast<int32_t>(t);
  const float frac = t - static_cast<float>(lo);
  const uint32_t code = static_cast<uint32_t>(lo) + (u < frac ? 1u : 0u);
  // QsgdDequantize, the bucket's step computed once (QsgdGridFor).
  if (res != nullptr) *res = ResidualAfter(a, QsgdLevel(code, grid.step, max_code));
  return code;
}

// Codes and residuals of count <= kBlock elements of one QSGD bucket
// whose scale is > 0 (its grid: QsgdGridFor), the first at global index
// `first`; `key` is RoundingKey's. The portable loop's blocks, and the
// vector loops' tails.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void QsgdBlock(const float* acc, float* res, uint64_t count, uint64_t first,
                                   const ElementKey& key, const QsgdGrid& grid, uint32_t max_code,
                                   uint8_t* codes) {
  uint32_t hash[kBlock];
  RoundingHashRun(key, first, count, hash);
  const float top = static_cast<float>(max_code);
  for (uint64_t i = 0; i < count; ++i) {
    codes[i] = static_cast<uint8_t>(
        QsgdElement(acc[i], hash[i], grid, top, max_code, kHasResidual ? res + i : nullptr));
  }
}

// A bucket of scale > 0 block by block into the packer (the portable
// loop, and the vector loops' buckets whose grid divides).
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void QsgdBucketByBlocks(const float* acc, float* res, uint64_t len,
                                            uint64_t first, const ElementKey& key,
                                            const QsgdGrid& grid, uint32_t max_code,
                                            CodePacker* packer) {
  for (uint64_t at = 0; at < len; at += kBlock) {
    const uint64_t count = len - at < kBlock ? len - at : kBlock;
    QsgdBlock<kHasResidual>(acc + at, kHasResidual ? res + at : nullptr, count, first + at, key,
                            grid, max_code, packer->Slots());
    packer->Commit(count);
  }
}

// A bucket with nothing finite and nonzero: QsgdZeroScaleCode, which
// decodes to +0.
GRADWIRE_CPU_INLINE void ZeroScaleBlock(const float* acc, float* res, uint64_t count,
                                        uint32_t max_code, uint8_t* codes) {
  memset(codes, static_cast<int>(QsgdZeroScaleCode(max_code)), count);
  if (res == nullptr) return;
  for (uint64_t i = 0; i < count; ++i) res[i] = ResidualAfter(acc[i], 0.0f);
}

// The end of a vector first pass over a bucket of len elements (grad,
// residual as in AccumulateBucket) whose first `at` are accumulated with
// `top` their largest |acc| as bits (a NaN or Inf included): the rest
// accumulated, and the scale (MaxFiniteMagnitude) returned, its
// non-finite count added. Only where `top` is not finite is the bucket
// read again.
GRADWIRE_CPU_INLINE float FinishScale(const float* grad, float* residual, uint64_t len, uint64_t at,
                                      uint32_t top, uint64_t* nonfinite) {
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
    ZeroScaleBlock(acc + at, res == nullptr ? nullptr : res + at, count, max_code, packer->Slots());
    packer->Commit(count);
  }
}

}  // namespace qsgd_encode

#if GRADWIRE_CPU_V4_FUNCTIONS
// QsgdCompress's loop on x86-64-v4 (call only where CpuIsX86V4()); returns
// the non-finite count. rounding: StreamKey(seed, step, kStreamRounding).
uint64_t QsgdEncodeV4(const float* grad, float* residual, uint64_t n, uint32_t bits,
                      uint32_t bucket_size, uint64_t rounding, uint8_t* scales, uint8_t* packed);
#endif

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QSGD_ENCODE_H_
