// Exact widening of IEEE binary16 and bfloat16 bit patterns to float, the
// same function on host and device (every 16-bit value is exactly
// representable as a float, so there is no rounding to disagree on).
#ifndef GRADWIRE_KERNELS_HALF_BITS_H_
#define GRADWIRE_KERNELS_HALF_BITS_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GRADWIRE_HALF_HD __host__ __device__ __forceinline__
#else
#define GRADWIRE_HALF_HD inline
#endif

namespace gradwire {
namespace kernels {

GRADWIRE_HALF_HD float FloatFromBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

GRADWIRE_HALF_HD float Bf16BitsToFloat(uint16_t h) { return FloatFromBits(static_cast<uint32_t>(h) << 16); }

GRADWIRE_HALF_HD float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return FloatFromBits(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    if (man == 0) return FloatFromBits(sign);  // signed zero
    // Subnormal: shift the mantissa up until its leading one is implicit.
    exp = 127 - 15 + 1;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x3FFu;
    return FloatFromBits(sign | (exp << 23) | (man << 13));
  }
  return FloatFromBits(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_HALF_BITS_H_
