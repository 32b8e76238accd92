// Bucketed quantizers with fused error feedback: QSGD (b bits, stochastic)
// and EF-signSGD (1 bit, scale = mean |acc|).
//
// Layout shared with the wire: elements are cut into buckets of
// `bucket_size` (the last may be partial); bucket j's fp32 scale is stored
// little endian at scales + 4j (BucketCount(n, bucket_size) of them), and
// element i's code is bit-packed at bit i*bits of `packed`
// (PackedBytes(n, bits) bytes, LSB first, unused tail bits zero). Both
// pointers may have any alignment. Element math: element_math.h.
//
// Fused contract (see topk.h): residual, when non-null, becomes
// ResidualAfter(acc, decoded). Each bucket is read, its scale computed,
// then quantized while still in cache: one pass over grad and residual.
// No temp storage.
#ifndef GRADWIRE_KERNELS_CPU_QUANTIZE_H_
#define GRADWIRE_KERNELS_CPU_QUANTIZE_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// QSGD: scale = max |acc| over the bucket's finite elements; codes from
// QsgdQuantizeScaled with u = UnitFloat(RoundingHash(RoundingKey(seed,
// step), i)). Give each rank its own seed here so rounding
// noise averages out across ranks (nothing on the receiver needs it).
// Requires 1 <= bits <= 8, bucket_size >= 1.
void QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                  uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                  uint8_t* packed, FusedStats* stats);

// dense[i] += QsgdDequantize(code_i, scale_bucket(i), 2^bits - 1).
void QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, float* dense);

// The average of `frames` QSGD payloads (scales[r], packed[r] each, n
// codes of `bits`): out[i] = (((0 + d_0[i]) + d_1[i]) + ...) / divisor,
// d_r[i] = QsgdDequantize of payload r's code i, i.e. the bits of zeroing
// out, then QsgdDecodeAccumulate of each payload in order, then
// DivideAll, in one pass that writes out once (x86-64-v3 and -v4;
// elsewhere those steps).
void QsgdDecodeAverage(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out);

// Sign: scale = mean |acc| over the bucket's finite elements (sum in
// double, then rounded to fp32; 0 if none); code = SignCode(acc), 1 bit.
void SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                  uint8_t* scales, uint8_t* packed, FusedStats* stats);

// dense[i] += SignDecode(code_i, scale_bucket(i)).
void SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                          uint32_t bucket_size, float* dense);

// The average of `frames` sign payloads (scales[r], packed[r] each, n
// codes): out[i] = (((0 + d_0[i]) + d_1[i]) + ...) / divisor, d_r[i] =
// SignDecode(code_i, scale_bucket(i)) of payload r, i.e. the bits of
// zeroing out, then SignDecodeAccumulate of each payload in order, then
// DivideAll, in one pass that writes out once.
void SignDecodeAverage(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bucket_size, float divisor, float* out);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_QUANTIZE_H_
