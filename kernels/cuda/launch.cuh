// Launch helpers shared by the .cu files of kernels/cuda (include from .cu
// files only: needs the CUDA runtime).
#ifndef GRADWIRE_KERNELS_CUDA_LAUNCH_CUH_
#define GRADWIRE_KERNELS_CUDA_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

__host__ __device__ inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline uint64_t Min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Streaming multiprocessors of the current device. The attribute is read
// once per device and remembered: kernels are launched per gradient bucket,
// and the runtime's attribute query is not free.
inline absl::Status MultiprocessorCount(int* sms) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];  // 0: not asked yet
  int device = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (device >= 0 && device < kMaxDevices) {
    *sms = cache[device].load(std::memory_order_relaxed);
    if (*sms > 0) return absl::OkStatus();
  }
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device));
  if (device >= 0 && device < kMaxDevices) cache[device].store(*sms, std::memory_order_relaxed);
  return absl::OkStatus();
}

// A grid-stride launch over `work` threads' worth of items: at most
// `blocks_per_sm` blocks per SM (the rest loop), at least one block.
inline absl::Status GridFor(uint64_t work, int threads, int blocks_per_sm, unsigned* grid) {
  int sms = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(MultiprocessorCount(&sms));
  *grid = static_cast<unsigned>(std::max<uint64_t>(
      1, std::min<uint64_t>(CeilDiv(work, threads), static_cast<uint64_t>(sms) * blocks_per_sm)));
  return absl::OkStatus();
}

constexpr int kThreads = 256;  // block size of the element-wise kernels

// Payload descriptors handed to a kernel by value, kWorkersPerLaunch at a
// time (the sums of several workers' payloads).
constexpr int kWorkersPerLaunch = 64;
template <typename Payload>
struct PayloadBatch {
  Payload p[kWorkersPerLaunch];
  int count;
};

// A sum over many payloads in worker order: calls launch(batch, first,
// last) for consecutive batches, at least once (an empty batch when there
// are no payloads, so that the sum still zeroes and scales its output).
// `first`: the batch starts the sum; `last`: it ends it.
template <typename Payload, typename Launch>
absl::Status ForEachBatch(absl::Span<const Payload> payloads, const Launch& launch) {
  size_t done = 0;
  do {
    PayloadBatch<Payload> batch;
    batch.count = static_cast<int>(std::min<size_t>(kWorkersPerLaunch, payloads.size() - done));
    for (int w = 0; w < batch.count; ++w) batch.p[w] = payloads[done + w];
    const bool first = done == 0;
    done += batch.count;
    GRADWIRE_KERNELS_RETURN_IF_ERROR(launch(batch, first, done == payloads.size()));
  } while (done < payloads.size());
  return absl::OkStatus();
}

// Compressors report FusedStats {selected, nonfinite}: the counters are
// zeroed here (asynchronously, so the call stays graph-capturable), then
// the kernel's first thread writes `selected` and every block adds its
// non-finite count. Nothing is written for a null `stats`.
inline absl::Status ZeroStats(FusedStats* stats, cudaStream_t stream) {
  if (stats == nullptr) return absl::OkStatus();
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(stats, 0, sizeof(FusedStats), stream));
  return absl::OkStatus();
}

// Adds every thread's `count` to *counter (may be null: nothing) with one
// global atomic per block: warp sums, then one shared sum. Called by every
// thread of the block, after its last element.
__device__ inline void AddBlockCount(unsigned long long* counter, uint32_t count) {
  __shared__ unsigned long long block_count;
  if (counter == nullptr) return;  // uniform across the block
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  for (int o = 16; o > 0; o >>= 1) count += __shfl_xor_sync(0xffffffffu, count, o);
  if (threadIdx.x % 32 == 0 && count != 0) atomicAdd(&block_count, count);
  __syncthreads();
  if (threadIdx.x == 0 && block_count != 0) atomicAdd(counter, block_count);
}

// The counter a compressor adds its non-finite elements to (null: none).
__device__ inline unsigned long long* NonFiniteCounter(FusedStats* stats) {
  return stats != nullptr ? reinterpret_cast<unsigned long long*>(&stats->nonfinite) : nullptr;
}

// stats->selected, written once per call by the first thread of the grid.
__device__ inline void WriteSelected(FusedStats* stats, uint64_t selected) {
  if (stats != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    *reinterpret_cast<unsigned long long*>(&stats->selected) = selected;
  }
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_LAUNCH_CUH_
