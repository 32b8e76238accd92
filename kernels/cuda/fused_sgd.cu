#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/fused_sgd.h"
#include "gradwire/kernels/validate.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

constexpr int kThreads = 256;

struct SgdChunk {
  uint64_t offset;  // first element of the chunk within its tensor
  uint32_t tensor;
  uint32_t unused;
};

size_t AlignUp(size_t x) { return (x + 255) / 256 * 256; }

__global__ void __launch_bounds__(kThreads)
    FusedSgdKernel(const SgdTensor* __restrict__ tensors, const SgdChunk* __restrict__ chunks,
                   uint64_t num_chunks, SgdOptions o) {
  for (uint64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const SgdChunk chunk = chunks[c];
    const SgdTensor t = tensors[chunk.tensor];
    const uint64_t begin = chunk.offset;
    const uint64_t end = min(begin + kSgdChunkElements, t.size);
    const bool has_buf = o.momentum != 0.0f;
    // 16-byte accesses when every stream is 16-byte aligned at `begin`
    // (chunk offsets are multiples of 4 elements).
    const bool vec = ((reinterpret_cast<uintptr_t>(t.param) | reinterpret_cast<uintptr_t>(t.grad) |
                       (has_buf ? reinterpret_cast<uintptr_t>(t.momentum) : 0)) &
                      15) == 0;
    uint64_t i = begin;
    if (vec) {
      const uint64_t vec_end = begin + (end - begin) / 4 * 4;
      for (uint64_t v = begin + 4 * threadIdx.x; v < vec_end; v += 4 * kThreads) {
        float4 p = *reinterpret_cast<const float4*>(t.param + v);
        const float4 g = __ldg(reinterpret_cast<const float4*>(t.grad + v));
        float4 b =
            has_buf ? *reinterpret_cast<const float4*>(t.momentum + v) : make_float4(0, 0, 0, 0);
        SgdUpdate(o, g.x, &p.x, &b.x);
        SgdUpdate(o, g.y, &p.y, &b.y);
        SgdUpdate(o, g.z, &p.z, &b.z);
        SgdUpdate(o, g.w, &p.w, &b.w);
        *reinterpret_cast<float4*>(t.param + v) = p;
        if (has_buf) *reinterpret_cast<float4*>(t.momentum + v) = b;
      }
      i = vec_end;
    }
    for (uint64_t j = i + threadIdx.x; j < end; j += kThreads) {
      float b = has_buf ? t.momentum[j] : 0.0f;
      SgdUpdate(o, t.grad[j], &t.param[j], &b);
      if (has_buf) t.momentum[j] = b;
    }
  }
}

}  // namespace

absl::Status PrepareFusedSgd(void* storage, size_t* storage_bytes,
                             absl::Span<const SgdTensor> tensors, const SgdOptions& options,
                             FusedSgdPlan* plan, Stream stream) {
  if (storage_bytes == nullptr)
    return absl::InvalidArgumentError("PrepareFusedSgd: storage_bytes is null");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ValidateSgd(tensors, options));
  std::vector<SgdChunk> chunks;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (uint64_t off = 0; off < tensors[t].size; off += kSgdChunkElements) {
      chunks.push_back(SgdChunk{off, static_cast<uint32_t>(t), 0});
    }
  }
  const size_t tensor_bytes = AlignUp(tensors.size() * sizeof(SgdTensor));
  const size_t chunk_bytes = AlignUp(chunks.size() * sizeof(SgdChunk));
  const size_t needed = std::max<size_t>(tensor_bytes + chunk_bytes, 256);
  if (storage == nullptr) {
    *storage_bytes = needed;
    return absl::OkStatus();
  }
  if (*storage_bytes < needed)
    return absl::InvalidArgumentError("PrepareFusedSgd: storage too small");
  if (plan == nullptr) return absl::InvalidArgumentError("PrepareFusedSgd: plan is null");
  if (tensors.size() > UINT32_MAX)
    return absl::InvalidArgumentError("PrepareFusedSgd: too many tensors");
  char* base = static_cast<char*>(storage);
  if (!tensors.empty()) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        base, tensors.data(), tensors.size() * sizeof(SgdTensor), cudaMemcpyHostToDevice, stream));
  }
  if (!chunks.empty()) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + tensor_bytes, chunks.data(),
                                                  chunks.size() * sizeof(SgdChunk),
                                                  cudaMemcpyHostToDevice, stream));
  }
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  int device = 0, sms = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  plan->tensors = base;
  plan->chunks = base + tensor_bytes;
  plan->num_chunks = chunks.size();
  plan->has_momentum = true;
  for (const SgdTensor& t : tensors) {
    if (t.size != 0 && t.momentum == nullptr) plan->has_momentum = false;
  }
  plan->grid =
      static_cast<uint32_t>(std::min<uint64_t>(chunks.size(), static_cast<uint64_t>(sms) * 8));
  return absl::OkStatus();
}

absl::Status FusedSgdStep(const FusedSgdPlan& plan, const SgdOptions& options, Stream stream) {
  if (plan.num_chunks == 0) return absl::OkStatus();
  if (options.momentum != 0.0f && !plan.has_momentum) {
    return absl::InvalidArgumentError(
        "SGD: momentum != 0 but the registered tensors have no momentum buffers");
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ValidateSgdOptions(options));
  FusedSgdKernel<<<plan.grid, kThreads, 0, stream>>>(static_cast<const SgdTensor*>(plan.tensors),
                                                     static_cast<const SgdChunk*>(plan.chunks),
                                                     plan.num_chunks, options);
  GRADWIRE_CUDA_CHECK_LAUNCH("FusedSgdKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
