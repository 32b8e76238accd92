// Stand-ins for the CUDA kernels in a build without a CUDA toolkit: every
// entry point answers Unavailable. Dispatch never routes here (without CUDA
// every buffer is host memory), so only direct callers see these.
#include <string>

#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/divide.h"
#include "gradwire/kernels/cuda/fused_sgd.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/quantized_sum.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/sparse.h"
#include "gradwire/kernels/cuda/sparse_sum.h"
#include "gradwire/kernels/cuda/topk.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {
absl::Status NoCuda(const char* what) {
  return absl::UnavailableError(std::string(what) + ": gradwire was built without CUDA");
}
}  // namespace

absl::Status PrepareFusedSgd(void*, size_t*, absl::Span<const SgdTensor>, const SgdOptions&,
                             FusedSgdPlan*, Stream) {
  return NoCuda("PrepareFusedSgd");
}
absl::Status FusedSgdStep(const FusedSgdPlan&, const SgdOptions&, Stream) {
  return NoCuda("FusedSgdStep");
}
absl::Status SparseSumToDense(absl::Span<const SparsePayload>, float*, uint64_t,
                              const SparseSumOptions&, uint64_t*, Stream) {
  return NoCuda("SparseSumToDense");
}
absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload>, const QuantizedFormat&, float*,
                                 uint64_t, const SparseSumOptions&, Stream) {
  return NoCuda("QuantizedSumToDense");
}
absl::Status TopKCompress(void*, uint64_t*, const float*, float*, uint64_t, uint64_t, ValueFormat,
                          uint32_t*, uint8_t*, FusedStats*, Stream) {
  return NoCuda("TopKCompress");
}
absl::Status TopKCompress16(void*, uint64_t*, const uint16_t*, ValueFormat, uint64_t, uint64_t,
                            ValueFormat, uint32_t*, uint8_t*, FusedStats*, Stream) {
  return NoCuda("TopKCompress16");
}
absl::Status ApproxTopKCompress(void*, uint64_t*, const float*, float*, uint64_t, uint64_t,
                                ValueFormat, uint32_t*, uint8_t*, FusedStats*, ApproxTopKBand*,
                                Stream) {
  return NoCuda("ApproxTopKCompress");
}
absl::Status RandomKIndices(void*, uint64_t*, uint64_t, uint64_t, uint64_t, uint64_t, uint32_t*,
                            Stream) {
  return NoCuda("RandomKIndices");
}
absl::Status RandomKCompress(void*, uint64_t*, const float*, float*, uint64_t, uint64_t, uint64_t,
                             uint64_t, ValueFormat, uint32_t*, uint8_t*, FusedStats*, Stream) {
  return NoCuda("RandomKCompress");
}
absl::Status QsgdCompress(const float*, float*, uint64_t, uint32_t, uint32_t, uint64_t, uint64_t,
                          uint8_t*, uint8_t*, FusedStats*, Stream) {
  return NoCuda("QsgdCompress");
}
absl::Status QsgdDecodeAccumulate(const uint8_t*, const uint8_t*, uint64_t, uint32_t, uint32_t,
                                  float*, Stream) {
  return NoCuda("QsgdDecodeAccumulate");
}
absl::Status SignCompress(const float*, float*, uint64_t, uint32_t, uint8_t*, uint8_t*, FusedStats*,
                          Stream) {
  return NoCuda("SignCompress");
}
absl::Status SignDecodeAccumulate(const uint8_t*, const uint8_t*, uint64_t, uint32_t, float*,
                                  Stream) {
  return NoCuda("SignDecodeAccumulate");
}
absl::Status CastCompress(const float*, float*, uint64_t, ValueFormat, uint8_t*, FusedStats*,
                          Stream) {
  return NoCuda("CastCompress");
}
absl::Status CastDecodeAccumulate(const uint8_t*, uint64_t, ValueFormat, float*, Stream) {
  return NoCuda("CastDecodeAccumulate");
}
absl::Status DivideAll(float*, uint64_t, float, Stream) { return NoCuda("DivideAll"); }
absl::Status SparseDecodeAccumulate(const uint32_t*, const uint8_t*, uint64_t, ValueFormat, float*,
                                    Stream) {
  return NoCuda("SparseDecodeAccumulate");
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
