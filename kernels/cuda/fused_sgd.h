// Fused multi-tensor SGD on the GPU: one launch updates every parameter
// tensor of a model (SGD with momentum, dampening, Nesterov and weight
// decay; kernels/sgd_math.h has the formula). Same bits as
// kernels/cpu/fused_sgd.h.
//
// The tensor list is registered once: PrepareFusedSgd copies the tensor
// descriptors and a chunk table (which tensor and offset each block-sized
// chunk covers) into caller-owned device storage, sized by the usual query
// (call with storage == nullptr first). Each training step is then a single
// FusedSgdStep launch; the pointers inside must stay valid and unmoved.
#ifndef GRADWIRE_KERNELS_CUDA_FUSED_SGD_H_
#define GRADWIRE_KERNELS_CUDA_FUSED_SGD_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/sgd_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// Elements of one tensor one block updates in one go.
inline constexpr uint64_t kSgdChunkElements = 16384;

// What PrepareFusedSgd leaves in the caller's storage.
struct FusedSgdPlan {
  const void* tensors = nullptr;  // device array of SgdTensor
  const void* chunks = nullptr;   // device chunk table
  uint64_t num_chunks = 0;
  uint32_t grid = 0;          // blocks per launch (a few per SM; blocks loop over chunks)
  bool has_momentum = false;  // every non-empty tensor has a momentum buffer
};

// Size query (storage == nullptr: sets *storage_bytes, does nothing else),
// then the upload of `tensors` (host array of device pointers) into storage.
// Validates like the CPU reference. Synchronizes `stream` once (setup, not
// a hot call) so the host arrays may be freed afterwards.
absl::Status PrepareFusedSgd(void* storage, size_t* storage_bytes,
                             absl::Span<const SgdTensor> tensors, const SgdOptions& options,
                             FusedSgdPlan* plan, Stream stream);

// One step over every registered tensor, asynchronous on `stream`.
absl::Status FusedSgdStep(const FusedSgdPlan& plan, const SgdOptions& options, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_FUSED_SGD_H_
