// Dense casts (fp32 copy, fp16, bf16) with fused error feedback.
//
// values[i] = acc[i] in `format` (little endian, any alignment); the
// residual, when non-null, becomes ResidualAfter(acc, RoundToFormat(acc)):
// the rounding error, or the overflow beyond the format's largest finite
// value (casts saturate, see element_math.h).
#ifndef GRADWIRE_KERNELS_CPU_CAST_H_
#define GRADWIRE_KERNELS_CPU_CAST_H_

#include <stdint.h>

#include "absl/functional/function_ref.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

void CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                  uint8_t* values, FusedStats* stats);

// Elements a chunk of CastCompressInChunks: 16-32 KiB of grad and of the
// residual, 8-16 KiB of values, so that a chunk's values are still in L1
// (or at worst L2) when `written` reads them.
inline constexpr uint64_t kCastChunkElements = 4096;

// CastCompress (the same bits), kCastChunkElements elements at a time:
// once a chunk's values are written, written(first byte, bytes) is called
// with them, chunk after chunk in order, every value byte in exactly one
// call. A caller that reads the values again (a frame's checksum) does it
// there, from cache, instead of in a second pass over memory.
void CastCompressInChunks(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats,
                          absl::FunctionRef<void(const uint8_t* chunk, uint64_t bytes)> written);

// dense[i] += LoadValue(values, i, format).
void CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense);

// The average of `frames` dense payloads, values[r] each (n values in
// `format`): out[i] = (((0 + v_0[i]) + v_1[i]) + ...) / divisor, v_r[i] =
// LoadValue(values[r], i, format), i.e. the bits of zeroing out, then
// CastDecodeAccumulate of each payload in order, then DivideAll, in one
// pass that writes out once. out may not overlap the payloads.
void CastDecodeAverage(const uint8_t* const* values, uint64_t frames, uint64_t n,
                       ValueFormat format, float divisor, float* out);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_CAST_H_
