// Stand-ins for the CUDA kernels in a build without a CUDA toolkit: every
// entry point answers Unavailable. Dispatch never routes here (without CUDA
// every buffer is host memory), so only direct callers see these.
#include "gradwire/kernels/cuda/decode_accumulate.h"
#include "gradwire/kernels/cuda/fused_sgd.h"

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
                              const SparseSumOptions&, Stream) {
  return NoCuda("SparseSumToDense");
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
