// The candidate pass of the device-side radix selection (internal to
// kernels/cuda): every index whose top key digit is >= the band's, in
// index order, in one pass over n.
//
// Each block takes a tile of kSelectRows rows of kSelectThreads consecutive
// elements. Thread t reads element t of every row, so each warp reads 32
// consecutive keys per row (coalesced; cub::DeviceSelect::If over a
// counting iterator, which this replaces, evaluated the key inside its
// predicate in a blocked layout: lane l read 16 elements apart from lane
// l + 1). A ballot per row and warp marks the candidates; the per-(row,
// warp) counts are scanned in index order inside the block, and the
// tile's offset comes from a decoupled look-back over the tiles before it
// (tiles are handed out in order by an atomic ticket, so every tile a
// block waits for has started). Temp: one 64-bit status word per tile,
// zeroed with the plan.
#ifndef GRADWIRE_KERNELS_CUDA_SELECT_CANDIDATES_CUH_
#define GRADWIRE_KERNELS_CUDA_SELECT_CANDIDATES_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>

#include "gradwire/kernels/cuda/radix_kernels.cuh"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace radix {

constexpr int kSelectThreads = 256;
constexpr int kSelectWarps = kSelectThreads / 32;
constexpr int kSelectRows = 16;
constexpr uint64_t kSelectTile = static_cast<uint64_t>(kSelectThreads) * kSelectRows;

// A tile's status word: flag in the top 2 bits, count in the low 62.
constexpr unsigned long long kTileAggregate = 1ull << 62;  // the tile's own count
constexpr unsigned long long kTilePrefix = 2ull << 62;     // count of it and all before it
constexpr unsigned long long kTileValue = (1ull << 62) - 1;

using TileStatus = ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>;

// Run by warp 0 of the block holding `tile`: publishes the tile's
// aggregate, sums the tiles before it (32 at a time, waiting for each to
// publish, stopping at the first that has its inclusive prefix), publishes
// the tile's inclusive prefix and returns the exclusive one.
__device__ inline unsigned long long LookBack(unsigned long long* status, uint64_t tile,
                                              unsigned long long aggregate) {
  const int lane = threadIdx.x % 32;
  if (tile == 0) {
    if (lane == 0)
      TileStatus(status[0]).store(kTilePrefix | aggregate, ::cuda::memory_order_relaxed);
    return 0;
  }
  if (lane == 0) {
    TileStatus(status[tile]).store(kTileAggregate | aggregate, ::cuda::memory_order_relaxed);
  }
  unsigned long long exclusive = 0;
  for (int64_t top = static_cast<int64_t>(tile) - 1;; top -= 32) {
    const int64_t mine = top - lane;        // lane 0: the nearest tile not summed yet
    unsigned long long word = kTilePrefix;  // before tile 0: a prefix of 0
    if (mine >= 0) {
      do {
        word = TileStatus(status[mine]).load(::cuda::memory_order_relaxed);
      } while ((word >> 62) == 0);
    }
    const unsigned prefixes = __ballot_sync(0xffffffffu, (word >> 62) == 2);
    const int first = prefixes != 0 ? __ffs(prefixes) - 1 : 32;
    unsigned long long value = lane <= first ? (word & kTileValue) : 0;
    for (int o = 16; o > 0; o >>= 1) value += __shfl_xor_sync(0xffffffffu, value, o);
    exclusive += value;
    if (prefixes != 0) break;
  }
  if (lane == 0) {
    TileStatus(status[tile])
        .store(kTilePrefix | (exclusive + aggregate), ::cuda::memory_order_relaxed);
  }
  return exclusive;
}

template <typename Source>
__global__ void __launch_bounds__(kSelectThreads)
    SelectCandidatesKernel(Source src, uint64_t n, int shift, uint32_t* __restrict__ cand,
                           unsigned long long* status, Plan* plan) {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t offsets[kSelectRows * kSelectWarps];  // (row, warp) order = index order
  __shared__ unsigned long long tile_offset;
  __shared__ unsigned int ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(&plan->select_ticket, 1u);
  __syncthreads();
  const uint64_t tile = ticket;
  const uint64_t num_tiles = CeilDiv(n, kSelectTile);
  const uint32_t band = plan->prefix;  // level 0's pick: stream order makes it visible
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint64_t base = tile * kSelectTile + threadIdx.x;
  // Every key of the tile first (kSelectRows loads in flight), then ballots.
  uint32_t keys[kSelectRows];
#pragma unroll
  for (int r = 0; r < kSelectRows; ++r) {
    const uint64_t i = base + static_cast<uint64_t>(r) * kSelectThreads;
    keys[r] = i < n ? src.Key(i) >> shift : 0u;
  }
  unsigned masks[kSelectRows];
#pragma unroll
  for (int r = 0; r < kSelectRows; ++r) {
    const uint64_t i = base + static_cast<uint64_t>(r) * kSelectThreads;
    masks[r] = __ballot_sync(0xffffffffu, i < n && keys[r] >= band);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kSelectRows; ++r) offsets[r * kSelectWarps + warp] = __popc(masks[r]);
  }
  __syncthreads();
  // Exclusive scan of the 128 (row, warp) counts; thread t holds entry t.
  static_assert(kSelectRows * kSelectWarps <= kSelectThreads, "one count per thread");
  const bool holds = threadIdx.x < kSelectRows * kSelectWarps;
  const uint32_t count = holds ? offsets[threadIdx.x] : 0u;
  uint32_t before = 0, aggregate = 0;
  Scan(scan_storage).ExclusiveSum(count, before, aggregate);
  __syncthreads();  // every count is read before any offset overwrites it
  if (holds) offsets[threadIdx.x] = before;
  if (warp == 0) {
    const unsigned long long exclusive = LookBack(status, tile, aggregate);
    if (lane == 0) {
      tile_offset = exclusive;
      if (tile == num_tiles - 1) plan->num_cand = static_cast<long long>(exclusive + aggregate);
    }
  }
  __syncthreads();
  const unsigned lower_lanes = (1u << lane) - 1u;
#pragma unroll
  for (int r = 0; r < kSelectRows; ++r) {
    if ((masks[r] >> lane) & 1u) {
      const uint64_t pos = tile_offset + offsets[r * kSelectWarps + warp] +
                           static_cast<uint64_t>(__popc(masks[r] & lower_lanes));
      cand[pos] = static_cast<uint32_t>(base + static_cast<uint64_t>(r) * kSelectThreads);
    }
  }
}

}  // namespace radix
}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_SELECT_CANDIDATES_CUH_
