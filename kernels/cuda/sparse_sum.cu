#include <cuda_runtime.h>

#include <algorithm>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/sparse_sum.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kTile = 4096;       // dense elements per shared-memory tile (16 KB)
constexpr int kWorkersPerLaunch = 64;  // payload descriptors passed by value

struct WorkerList {
  SparsePayload p[kWorkersPerLaunch];
  int count;
};

__host__ __device__ __forceinline__ uint64_t Min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// First position in [lo, hi) of `idx` whose value is >= key.
__device__ uint64_t LowerBound(const uint32_t* idx, uint64_t lo, uint64_t hi, uint64_t key) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (idx[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Block b owns a contiguous run of tiles, so each worker's cursor only moves
// forward: one full binary search per block, then short ones per tile.
__global__ void __launch_bounds__(kThreads)
    SparseSumKernel(const WorkerList workers, float* __restrict__ dense, uint64_t n,
                    uint64_t num_tiles, bool accumulate, float scale) {
  __shared__ float tile[kTile];
  __shared__ uint64_t cursor[kWorkersPerLaunch];
  __shared__ uint64_t seg_end[kWorkersPerLaunch];
  const uint64_t t_begin = num_tiles * blockIdx.x / gridDim.x;
  const uint64_t t_end = num_tiles * (blockIdx.x + 1) / gridDim.x;
  if (t_begin >= t_end) return;
  const int tid = threadIdx.x;
  if (tid < workers.count) {
    cursor[tid] = LowerBound(workers.p[tid].indices, 0, workers.p[tid].count, t_begin * kTile);
  }
  const bool vec = (reinterpret_cast<uintptr_t>(dense) & 15) == 0;
  for (uint64_t t = t_begin; t < t_end; ++t) {
    const uint64_t base = t * kTile;
    const uint32_t len = static_cast<uint32_t>(Min64(kTile, n - base));
    // Load (or zero) the tile.
    if (vec && len == kTile) {
      for (uint32_t j = 4 * tid; j < kTile; j += 4 * kThreads) {
        float4 v = accumulate ? *reinterpret_cast<const float4*>(dense + base + j)
                              : make_float4(0, 0, 0, 0);
        *reinterpret_cast<float4*>(&tile[j]) = v;
      }
    } else {
      for (uint32_t j = tid; j < len; j += kThreads) tile[j] = accumulate ? dense[base + j] : 0.0f;
    }
    // Each worker's entries inside [base, base + len): at most len of them.
    if (tid < workers.count) {
      const SparsePayload& p = workers.p[tid];
      const uint64_t lo = cursor[tid];
      seg_end[tid] = LowerBound(p.indices, lo, Min64(lo + len, p.count), base + len);
    }
    __syncthreads();
    for (int w = 0; w < workers.count; ++w) {
      const SparsePayload& p = workers.p[w];
      const uint64_t end = seg_end[w];
      for (uint64_t j = cursor[w] + tid; j < end; j += kThreads) {
        tile[p.indices[j] - base] += LoadValue(p.values, j, p.format);
      }
      __syncthreads();  // worker w's additions land before worker w+1's
    }
    if (tid < workers.count) cursor[tid] = seg_end[tid];
    if (vec && len == kTile) {
      for (uint32_t j = 4 * tid; j < kTile; j += 4 * kThreads) {
        float4 v = *reinterpret_cast<const float4*>(&tile[j]);
        v.x *= scale;
        v.y *= scale;
        v.z *= scale;
        v.w *= scale;
        *reinterpret_cast<float4*>(dense + base + j) = v;
      }
    } else {
      for (uint32_t j = tid; j < len; j += kThreads) dense[base + j] = tile[j] * scale;
    }
    __syncthreads();  // the tile is rewritten by the next iteration's load
  }
}

}  // namespace

absl::Status SparseSumToDense(absl::Span<const SparsePayload> payloads, float* dense, uint64_t n,
                              const SparseSumOptions& options, Stream stream) {
  for (size_t w = 0; w < payloads.size(); ++w) {
    const SparsePayload& p = payloads[w];
    if (p.count > n)
      return absl::InvalidArgumentError("SparseSumToDense: a worker has more entries than n");
    if (p.count > 0 && (p.indices == nullptr || p.values == nullptr)) {
      return absl::InvalidArgumentError("SparseSumToDense: a worker has null buffers");
    }
    if (p.format != ValueFormat::kFp32 && p.format != ValueFormat::kFp16 &&
        p.format != ValueFormat::kBf16) {
      return absl::InvalidArgumentError("SparseSumToDense: unknown value type");
    }
  }
  if (n == 0) return absl::OkStatus();
  if (dense == nullptr) return absl::InvalidArgumentError("SparseSumToDense: dense is null");
  int device = 0, sms = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const uint64_t num_tiles = (n + kTile - 1) / kTile;
  const unsigned grid =
      static_cast<unsigned>(std::min<uint64_t>(num_tiles, static_cast<uint64_t>(sms) * 8));
  size_t done = 0;
  do {  // at least one launch, so P = 0 still zeroes/scales
    WorkerList list;
    list.count = static_cast<int>(std::min<size_t>(kWorkersPerLaunch, payloads.size() - done));
    for (int w = 0; w < list.count; ++w) list.p[w] = payloads[done + w];
    const bool first = done == 0;
    done += list.count;
    const bool last = done == payloads.size();
    SparseSumKernel<<<grid, kThreads, 0, stream>>>(
        list, dense, n, num_tiles, first ? options.accumulate : true, last ? options.scale : 1.0f);
    GRADWIRE_CUDA_CHECK_LAUNCH("SparseSumKernel");
  } while (done < payloads.size());
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
