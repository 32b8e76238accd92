// Top-k by magnitude on the GPU, exact and approximate, with fused error
// feedback. Same contract as kernels/cpu/topk.h (same selected set, order,
// values and residual, bit for bit), plus a stream; random-k, which shares
// the selection, is kernels/cuda/randomk.h; kernels/cuda/radix_select.cuh
// describes the passes.
//
// Every pointer is device memory, including `stats` and `band` (either may
// be null): nothing is copied back and the host never waits, so a call can
// be captured in a CUDA graph. Temp storage follows CUB: call with
// temp == nullptr to learn *temp_bytes for n (about 4n + 64 KiB: the
// candidate list's worst case, every element in the k-th element's bin),
// allocate once, reuse. Requires k <= n <= 2^32; InvalidArgument otherwise,
// or for null buffers, or too little temp storage. Errors from CUDA come
// back as Internal, naming the call.
#ifndef GRADWIRE_KERNELS_CUDA_TOPK_H_
#define GRADWIRE_KERNELS_CUDA_TOPK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// Exact top-k of |grad + residual|; residual (may be null) gets the new
// residual. Two passes over n (three reads with error feedback: grad and
// residual once, the stored acc once).
absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, Stream stream);

// Exact top-k of a 16-bit gradient (grad_format kFp16 or kBf16), no error
// feedback: one 2^15-bin histogram pass gives the exact k-th magnitude,
// one candidate pass collects the output. Same result as TopKCompress on
// the widened fp32 gradient with a null residual.
absl::Status TopKCompress16(void* temp, uint64_t* temp_bytes, const uint16_t* grad,
                            ValueFormat grad_format, uint64_t n, uint64_t k, ValueFormat format,
                            uint32_t* indices, uint8_t* values, FusedStats* stats, Stream stream);

// Approximate top-k (cpu/topk.h ApproxTopKCompress): exactly k selected:
// everything above the band (the 11-bit key bin holding the k-th largest
// key), then the band's lowest-index elements. Same band, same `above` and
// the same tolerance as the CPU version; the band members chosen can differ
// from the CPU's, which fills from its sample-bounded candidates. `band`
// (device, may be null) receives the band; in_band counts the whole band.
// Two passes over n, no refinement.
absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_TOPK_H_
