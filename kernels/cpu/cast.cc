#include "gradwire/kernels/cpu/cast.h"

#include "gradwire/kernels/cpu/clones_x86.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// The loops below are written without branches (every case computed, the
// answer selected) so that GCC vectorizes them in every clone; each helper
// returns the bits its element_math.h counterpart returns, which the tests
// check over every input class (and every fp16 value).

// FloatToHalfBits.
GRADWIRE_CPU_INLINE uint32_t HalfBits(uint32_t x) {
  const uint32_t a = x & 0x7fffffffu;
  const uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  const uint32_t subnormal = FloatBits(BitsFloat(a) + 0.5f) - 0x3f000000u;
  uint32_t r = SelectBits(a < 0x38800000u, subnormal, normal);
  r = SelectBits(a >= 0x477ff000u, kHalfMaxBits, r);
  r = SelectBits(a == 0x7f800000u, 0x7c00u, r);
  r = SelectBits(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x1ffu), r);
  return ((x >> 16) & 0x8000u) | r;
}

// HalfBitsToFloat (h < 2^16).
GRADWIRE_CPU_INLINE float HalfFloat(uint32_t h) {
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  // Subnormal: m * 2^-24, exact. Normal: rebias. e == 31: Inf or NaN.
  const uint32_t subnormal =
      FloatBits(static_cast<float>(static_cast<int32_t>(m)) * 5.9604644775390625e-8f);
  uint32_t r = SelectBits(e == 0, subnormal, ((e + 112u) << 23) | (m << 13));
  r = SelectBits(e == 0x1fu, 0x7f800000u | (m << 13), r);
  return BitsFloat(((h & 0x8000u) << 16) | r);
}

// FloatToBf16Bits.
GRADWIRE_CPU_INLINE uint32_t Bf16Bits(uint32_t x) {
  const uint32_t a = x & 0x7fffffffu;
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  r = SelectBits(a >= 0x7f7f8000u, ((x >> 16) & 0x8000u) | kBf16MaxBits, r);
  r = SelectBits(a == 0x7f800000u, x >> 16, r);
  r = SelectBits(a > 0x7f800000u, (x >> 16) | 0x0040u, r);
  return r & 0xffffu;
}

// One element: stores acc's value and returns its residual.
template <ValueFormat F>
GRADWIRE_CPU_INLINE float CastElement(float a, uint8_t* values, uint64_t i) {
  const uint32_t x = FloatBits(a);
  float decoded = a;
  if (F == ValueFormat::kFp16) {
    const uint32_t h = HalfBits(x);
    StoreLe<uint16_t>(values + 2 * i, static_cast<uint16_t>(h));
    decoded = HalfFloat(h);
  } else if (F == ValueFormat::kBf16) {
    const uint32_t b = Bf16Bits(x);
    StoreLe<uint16_t>(values + 2 * i, static_cast<uint16_t>(b));
    decoded = BitsFloat(b << 16);
  } else {
    StoreLe<uint32_t>(values + 4 * i, x);
  }
  return ResidualAfter(a, decoded);
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
    for (uint64_t i = start; i < end; ++i) {
      const float a = kHasResidual ? grad[i] + residual[i] : grad[i];
      nonfinite += IsFinite(a) ? 0u : 1u;
      const float r = CastElement<F>(a, values, i);
      if (kHasResidual) residual[i] = r;
    }
    total += nonfinite;
  }
  return total;
}

template <ValueFormat F>
GRADWIRE_CPU_CLONES uint64_t CastCompressAs(const float* grad, float* residual, uint64_t n,
                                            uint8_t* values) {
  return residual != nullptr ? CastLoop<F, true>(grad, residual, n, values)
                             : CastLoop<F, false>(grad, residual, n, values);
}

GRADWIRE_CPU_CLONES void DecodeAccumulateHalf(const uint8_t* __restrict values, uint64_t n,
                                              float* __restrict dense) {
  for (uint64_t i = 0; i < n; ++i) dense[i] += HalfFloat(LoadLe<uint16_t>(values + 2 * i));
}

GRADWIRE_CPU_CLONES void DecodeAccumulateBf16(const uint8_t* __restrict values, uint64_t n,
                                              float* __restrict dense) {
  for (uint64_t i = 0; i < n; ++i)
    dense[i] += BitsFloat(static_cast<uint32_t>(LoadLe<uint16_t>(values + 2 * i)) << 16);
}

GRADWIRE_CPU_CLONES void DecodeAccumulateFp32(const uint8_t* __restrict values, uint64_t n,
                                              float* __restrict dense) {
  for (uint64_t i = 0; i < n; ++i) dense[i] += BitsFloat(LoadLe<uint32_t>(values + 4 * i));
}

}  // namespace

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats) {
  uint64_t nonfinite = 0;
  switch (format) {
    case ValueFormat::kFp16:
      nonfinite = CastCompressAs<ValueFormat::kFp16>(grad, residual, n, values);
      break;
    case ValueFormat::kBf16:
      nonfinite = CastCompressAs<ValueFormat::kBf16>(grad, residual, n, values);
      break;
    default:
      nonfinite = CastCompressAs<ValueFormat::kFp32>(grad, residual, n, values);
      break;
  }
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  switch (format) {
    case ValueFormat::kFp16:
      DecodeAccumulateHalf(values, n, dense);
      break;
    case ValueFormat::kBf16:
      DecodeAccumulateBf16(values, n, dense);
      break;
    default:
      DecodeAccumulateFp32(values, n, dense);
      break;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
