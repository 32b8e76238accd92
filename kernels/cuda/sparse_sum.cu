#include <cuda_runtime.h>

#include <algorithm>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/cuda/sparse_sum.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

constexpr uint32_t kTile = 4096;  // dense elements per shared-memory tile (16 KB)
constexpr int kBlocksPerSm = 8;   // the grid's cap; all resident at once (<= 32 registers)

using WorkerList = PayloadBatch<SparsePayload>;

// First position in [lo, hi) of `idx` whose value is >= key (for any
// contents of idx: the answer stays within [lo, hi]).
__device__ uint64_t LowerBound(const uint32_t* idx, uint64_t lo, uint64_t hi, uint64_t key) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (idx[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Counts the entries that break the precondition (index >= n, or not above
// the previous index of the same worker) into *bad: every entry of every
// worker is looked at once, grid-strided, one atomic per warp that found any.
__device__ void CountBadEntries(const WorkerList& workers, uint64_t n, unsigned long long* bad) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kThreads;
  for (int w = 0; w < workers.count; ++w) {
    const SparsePayload& p = workers.p[w];
    // Warp-uniform loop bound, so the ballot sees whole warps.
    for (uint64_t j0 =
             static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x - threadIdx.x % 32;
         j0 < p.count; j0 += stride) {
      const uint64_t j = j0 + threadIdx.x % 32;
      bool broken = false;
      if (j < p.count) {
        const uint32_t i = p.indices[j];
        broken = i >= n || (j > 0 && i <= p.indices[j - 1]);
      }
      const unsigned found = __ballot_sync(0xffffffffu, broken);
      if (found != 0 && threadIdx.x % 32 == 0) atomicAdd(bad, __popc(found));
    }
  }
}

// Block b owns a contiguous run of tiles, so each worker's cursor only moves
// forward: one binary search per worker and block finds where its run
// starts; after that each tile takes a worker's entries in rounds of
// kThreads consecutive ones, a round ending the worker's share of the tile
// as soon as one of its entries lies past the tile (the barrier that counts
// them also orders worker w's additions before worker w+1's). An entry is
// added only if its index falls inside the tile, so no index, however
// broken, writes outside it.
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    SparseSumKernel(const WorkerList workers, float* __restrict__ dense, uint64_t n,
                    uint64_t num_tiles, bool accumulate, float scale, unsigned long long* bad) {
  __shared__ float tile[kTile];
  __shared__ uint64_t cursor[kWorkersPerLaunch];
  if (bad != nullptr) CountBadEntries(workers, n, bad);
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
    __syncthreads();  // the tile (and, the first time, the cursors) are ready
    for (int w = 0; w < workers.count; ++w) {
      const SparsePayload& p = workers.p[w];
      uint64_t at = cursor[w];
      for (;;) {
        const uint64_t j = at + tid;
        int in_tile = 0;
        if (j < p.count) {
          const uint64_t offset = p.indices[j] - base;  // wraps (huge) below the tile
          if (offset < len) {
            tile[offset] += LoadValue(p.values, j, p.format);
            in_tile = 1;
          }
        }
        const int taken = __syncthreads_count(in_tile);
        at += taken;
        if (taken < kThreads) break;
      }
      if (tid == 0) cursor[w] = at;  // read again only after the tile's last barrier
    }
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
                              const SparseSumOptions& options, uint64_t* bad_entries,
                              Stream stream) {
  for (size_t w = 0; w < payloads.size(); ++w) {
    const SparsePayload& p = payloads[w];
    if (p.count > n) {
      return absl::InvalidArgumentError("SparseSumToDense: a worker has more entries than n");
    }
    if (p.count > 0 && (p.indices == nullptr || p.values == nullptr)) {
      return absl::InvalidArgumentError("SparseSumToDense: a worker has null buffers");
    }
    if (p.format != ValueFormat::kFp32 && p.format != ValueFormat::kFp16 &&
        p.format != ValueFormat::kBf16) {
      return absl::InvalidArgumentError("SparseSumToDense: unknown value type");
    }
  }
  if (n > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("SparseSumToDense: n > 2^32 (u32 indices)");
  }
  if (n > 0 && dense == nullptr) {
    return absl::InvalidArgumentError("SparseSumToDense: dense is null");
  }
  if (bad_entries != nullptr) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(bad_entries, 0, sizeof(uint64_t), stream));
  }
  if (n == 0) return absl::OkStatus();
  const uint64_t num_tiles = CeilDiv(n, kTile);
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(num_tiles, 1, kBlocksPerSm, &grid));
  auto* bad = reinterpret_cast<unsigned long long*>(bad_entries);
  return ForEachBatch(payloads, [&](const WorkerList& batch, bool first, bool last) {
    SparseSumKernel<<<grid, kThreads, 0, stream>>>(batch, dense, n, num_tiles,
                                                   first ? options.accumulate : true,
                                                   last ? options.scale : 1.0f, bad);
    GRADWIRE_CUDA_CHECK_LAUNCH("SparseSumKernel");
    return absl::OkStatus();
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
