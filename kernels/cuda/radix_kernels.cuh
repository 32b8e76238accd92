// The kernels of the device-side radix selection (internal to kernels/cuda;
// radix_select.cuh describes the pipeline and launches them).
#ifndef GRADWIRE_KERNELS_CUDA_RADIX_KERNELS_CUH_
#define GRADWIRE_KERNELS_CUDA_RADIX_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace radix {

constexpr int kStreamThreads = 512;  // streaming passes over n
constexpr int kChunkThreads = 256;
constexpr int kChunkItems = 16;
constexpr uint64_t kChunk = kChunkThreads * kChunkItems;  // candidates per output chunk

// Digit schedule: the key is split into up to 3 digits, most significant
// first; digit L of key is (key >> shift[L]) & ((1 << width[L]) - 1).
struct Levels {
  int count;
  int shift[3];
  int width[3];
};

// Magnitude keys (<= 0x7f800001: 31 bits): 11 + 10 + 10 bits.
constexpr Levels kMagnitudeLevels = {3, {20, 10, 0}, {11, 10, 10}};
// Approximate top-k: the top 11 bits only (bins 1/8 octave wide).
constexpr Levels kApproxLevels = {1, {20, 0, 0}, {11, 0, 0}};
// Full 32-bit keys (random-k): 11 + 11 + 10 bits.
constexpr Levels kFullLevels = {3, {21, 10, 0}, {11, 11, 10}};
// 16-bit inputs: the 15-bit key in one 2^15-bin histogram.
constexpr Levels kHalfLevels = {1, {0, 0, 0}, {15, 0, 0}};

// State the kernels share through device memory (zeroed per call).
struct Plan {
  unsigned long long need;       // still to take among keys matching `prefix`
  unsigned long long nonfinite;  // acc elements that were NaN or Inf
  unsigned long long above0;     // elements whose top digit beats the band
  unsigned long long band0;      // elements in the band (top digit == prefix at level 0)
  long long num_cand;            // written by the candidate pass's last tile
  uint32_t prefix;               // key >> shift[level] of the k-th element, so far
  unsigned int tickets[3];       // blocks done with each level's histogram
  unsigned int select_ticket;    // tiles handed out by the candidate pass
};

// ------------------------------------------------------------- sources --
// A source gives, for element i, its key (after level 0 has run) and acc.

// fp32 magnitudes from `acc` (the gradient, or the residual buffer holding
// the raw acc after level 0).
struct MagnitudeSource {
  const float* acc;
  __device__ uint32_t Key(uint64_t i) const { return MagnitudeKey(acc[i]); }
  __device__ float Acc(uint64_t i) const { return acc[i]; }
};

// The 15 magnitude bits of an fp16/bf16 value + 1, NaN 0: orders exactly
// as MagnitudeKey of the widened value.
__device__ inline uint32_t Half16Key(uint16_t bits, bool bf16) {
  const uint32_t a = bits & 0x7fffu;
  const uint32_t inf = bf16 ? 0x7f80u : 0x7c00u;
  return a > inf ? 0u : a + 1u;
}

__device__ inline float Widen16(uint16_t bits, bool bf16) {
  return bf16 ? Bf16BitsToFloat(bits) : HalfBitsToFloat(bits);
}

struct Half16Source {
  const uint16_t* bits;
  bool bf16;
  __device__ uint32_t Key(uint64_t i) const { return Half16Key(bits[i], bf16); }
  __device__ float Acc(uint64_t i) const { return Widen16(bits[i], bf16); }
};

// Random-k: the smallest RandomKKey wins, so the key is its complement.
// `acc` may be null (index generation only).
struct RandomSource {
  ElementKey stream_key;  // RandomKElementKey(seed, step, n)
  const float* acc;
  __device__ uint32_t Key(uint64_t i) const { return ~RandomKKey(stream_key, i); }
  __device__ float Acc(uint64_t i) const { return acc[i]; }
};

// ------------------------------------------------------------- loaders --
// A loader feeds level 0 (and the all-or-none pass): Load(i) fetches what
// element i needs from memory; Use(i, staged, &acc) returns its key and
// acc, storing what must be stored (with error feedback the raw acc goes
// into the residual buffer); Acc(staged) is acc alone, storing nothing. Level 0 issues the Loads of
// all kUnroll elements of a step before the first Use, so a thread has 2 * kUnroll loads in flight
// instead of two ahead of each store.

// fp32 gradient (+ residual); the key from acc (top-k) or from the index
// (random-k).
template <typename KeyFn>
struct FloatLoader {
  static constexpr int kUnroll = 4;
  // 4 x 512 threads per SM (all 2048) caps registers at 32: the loop
  // needs no more; only the last block's pick (PickDigit) spills a little.
  static constexpr int kMinBlocks = 4;
  struct Staged {
    float grad, residual;
  };
  const float* grad;
  float* residual;  // null: no error feedback
  KeyFn key_of;
  __device__ Staged Load(uint64_t i) const {
    return Staged{__ldg(grad + i), residual != nullptr ? residual[i] : 0.0f};
  }
  __device__ float Acc(const Staged& s) const {
    return residual != nullptr ? s.grad + s.residual : s.grad;
  }
  __device__ uint32_t Use(uint64_t i, const Staged& s, float* acc) const {
    *acc = Acc(s);
    if (residual != nullptr) residual[i] = *acc;
    return key_of(i, *acc);
  }
};

struct MagnitudeOfAcc {
  __device__ uint32_t operator()(uint64_t, float acc) const { return MagnitudeKey(acc); }
};
struct RandomOfIndex {
  ElementKey stream_key;
  __device__ uint32_t operator()(uint64_t i, float) const { return ~RandomKKey(stream_key, i); }
};

// Random-k indices alone: no memory is read.
struct IndexOnlyLoader {
  static constexpr int kUnroll = 4;
  static constexpr int kMinBlocks = 4;
  struct Staged {};
  ElementKey stream_key;
  __device__ Staged Load(uint64_t) const { return Staged{}; }
  __device__ float Acc(const Staged&) const { return 0.0f; }
  __device__ uint32_t Use(uint64_t i, const Staged&, float* acc) const {
    *acc = 0.0f;
    return ~RandomKKey(stream_key, i);
  }
};

// 16-bit gradients. 2-byte loads and one 128 KB-histogram block per SM:
// more loads in flight per thread to cover memory latency.
struct Half16Loader {
  static constexpr int kUnroll = 16;
  static constexpr int kMinBlocks = 1;
  using Staged = uint16_t;
  const uint16_t* bits;
  bool bf16;
  __device__ Staged Load(uint64_t i) const { return __ldg(bits + i); }
  __device__ float Acc(Staged b) const { return Widen16(b, bf16); }
  __device__ uint32_t Use(uint64_t, Staged b, float* acc) const {
    *acc = Widen16(b, bf16);
    return Half16Key(b, bf16);
  }
};

// ----------------------------------------------------------- histograms --
// Adds 1 to shist[bin] for every lane of the warp; lanes with bin
// kNoBin add nothing. Lanes holding the same bin are counted by one
// shared atomic (an all-zero region, where every lane hits one bin, costs
// one atomic per warp instead of 32 serialized ones). Every lane of the
// warp must call it.
constexpr uint32_t kNoBin = 0xffffffffu;

__device__ inline void WarpAggregatedIncrement(uint32_t* shist, uint32_t bin) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const int leader = __ffs(peers) - 1;
  if (bin != kNoBin && static_cast<int>(threadIdx.x % 32) == leader) {
    atomicAdd(&shist[bin], static_cast<uint32_t>(__popc(peers)));
  }
}

// ---------------------------------------------------------------- pick --
using PickScan = cub::BlockScan<unsigned long long, kStreamThreads>;

// Run by one whole block (kStreamThreads): finds digit d with (count of
// digits > d) < need <= (count of digits >= d) and narrows the plan to it;
// level 0 starts from need = k. The histogram is read through L2 (__ldcg):
// the other blocks' atomics live there.
__device__ inline void PickDigit(const unsigned long long* hist, int bins, int width, int level,
                                 unsigned long long k, Plan* plan, PickScan::TempStorage& storage) {
  const unsigned long long need = level == 0 ? k : plan->need;
  const uint32_t old_prefix = level == 0 ? 0u : plan->prefix;
  const int per = (bins + kStreamThreads - 1) / kStreamThreads;
  // Thread t owns bins [top - per, top), counted from the highest bin down.
  const int top = bins - static_cast<int>(threadIdx.x) * per;
  unsigned long long sum = 0;
  for (int b = top - 1; b >= top - per && b >= 0; --b) sum += __ldcg(&hist[b]);
  unsigned long long before = 0;
  PickScan(storage).ExclusiveSum(sum, before);
  if (before < need && need <= before + sum) {
    unsigned long long acc = before;
    for (int b = top - 1; b >= top - per && b >= 0; --b) {
      const unsigned long long h = __ldcg(&hist[b]);
      if (acc + h >= need) {
        plan->prefix = (old_prefix << width) | static_cast<uint32_t>(b);
        plan->need = need - acc;
        if (level == 0) {
          plan->above0 = acc;
          plan->band0 = h;
        }
        break;
      }
      acc += h;
    }
  }
}

// True in the last block of the grid to get here (threadFenceReduction
// pattern): every block's histogram atomics are visible to it, so it picks
// the digit and saves a dependent single-block launch.
__device__ inline bool LastBlockDone(unsigned int* ticket) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  return last;
}

// Adds the block's shared histogram to the global one (non-empty bins only).
__device__ inline void FlushHistogram(const uint32_t* shist, int bins, unsigned long long* hist) {
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (shist[b] != 0) atomicAdd(&hist[b], static_cast<unsigned long long>(shist[b]));
  }
}

// ------------------------------------------------------------- level 0 --
// One pass over n: acc (stored into the residual with error feedback), the
// non-finite count, and the histogram of the top digit; the last block
// picks the band. Loop bounds are warp-uniform (a warp runs while its first
// element is < n) so that the histogram's warp aggregation sees whole
// warps.
template <typename Loader>
__global__ void __launch_bounds__(kStreamThreads, Loader::kMinBlocks)
    Level0Kernel(const Loader load, uint64_t n, int shift, int bins, int width,
                 unsigned long long k, unsigned long long* __restrict__ hist, Plan* plan) {
  extern __shared__ uint32_t shist[];
  __shared__ PickScan::TempStorage pick_storage;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) shist[b] = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  // The block size is the constant kStreamThreads (not blockDim.x) so that
  // the kU addresses of a step are one register plus immediate offsets.
  constexpr int kU = Loader::kUnroll;
  const uint64_t lane = threadIdx.x % 32;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kStreamThreads * kU;
  for (uint64_t i0 = static_cast<uint64_t>(blockIdx.x) * kStreamThreads * kU + threadIdx.x;
       i0 - lane < n; i0 += stride) {
    typename Loader::Staged staged[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {  // every load of the step first
      const uint64_t i = i0 + static_cast<uint64_t>(u) * kStreamThreads;
      if (i < n) staged[u] = load.Load(i);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint64_t i = i0 + static_cast<uint64_t>(u) * kStreamThreads;
      uint32_t bin = kNoBin;
      if (i < n) {
        float acc;
        bin = load.Use(i, staged[u], &acc) >> shift;
        nonfinite += IsFinite(acc) ? 0u : 1u;
      }
      WarpAggregatedIncrement(shist, bin);
    }
  }
  __syncthreads();
  FlushHistogram(shist, bins, hist);
  AddBlockCount(&plan->nonfinite, nonfinite);
  if (LastBlockDone(&plan->tickets[0])) PickDigit(hist, bins, width, 0, k, plan, pick_storage);
}

// Histogram of digit L over the candidates whose higher digits match.
template <typename Source>
__global__ void __launch_bounds__(kStreamThreads)
    CandidateHistKernel(Source src, const uint32_t* __restrict__ cand, int prev_shift, int shift,
                        int width, int level, unsigned long long k,
                        unsigned long long* __restrict__ hist, Plan* plan) {
  extern __shared__ uint32_t shist[];
  __shared__ PickScan::TempStorage pick_storage;
  const int bins = 1 << width;
  const uint32_t mask = static_cast<uint32_t>(bins - 1);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) shist[b] = 0;
  __syncthreads();
  const uint64_t m = static_cast<uint64_t>(plan->num_cand);
  const uint32_t prefix = plan->prefix;
  const uint64_t lane = threadIdx.x % 32;
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j - lane < m;
       j += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint32_t bin = kNoBin;
    if (j < m) {
      const uint32_t key = src.Key(cand[j]);
      if ((key >> prev_shift) == prefix) bin = (key >> shift) & mask;
    }
    WarpAggregatedIncrement(shist, bin);
  }
  __syncthreads();
  FlushHistogram(shist, bins, hist);
  if (LastBlockDone(&plan->tickets[level])) {
    PickDigit(hist, bins, width, level, k, plan, pick_storage);
  }
}

// -------------------------------------------------------------- output --
// Per-chunk counts, scanned as pairs in one cub::DeviceScan.
struct ChunkCounts {
  unsigned long long above;  // candidates whose key beats the threshold
  unsigned long long ties;   // candidates whose key equals it
};
struct AddCounts {
  __host__ __device__ ChunkCounts operator()(const ChunkCounts& a, const ChunkCounts& b) const {
    return ChunkCounts{a.above + b.above, a.ties + b.ties};
  }
};

// Per chunk of candidates: how many are above the threshold and how many
// tie with it. Chunks past the candidate count get zeros (the scan reads
// max_chunks entries).
template <typename Source>
__global__ void __launch_bounds__(kChunkThreads)
    ChunkCountKernel(Source src, const uint32_t* __restrict__ cand, int final_shift,
                     uint64_t max_chunks, ChunkCounts* __restrict__ counts, const Plan* plan) {
  using Reduce = cub::BlockReduce<uint32_t, kChunkThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  const uint64_t m = static_cast<uint64_t>(plan->num_cand);
  const uint32_t threshold = plan->prefix;
  const uint64_t chunks = CeilDiv(m, kChunk);
  for (uint64_t c = blockIdx.x; c < max_chunks; c += gridDim.x) {
    if (c >= chunks) {
      if (threadIdx.x == 0) counts[c] = ChunkCounts{0, 0};
      continue;
    }
    uint32_t packed = 0;  // above in the low 16 bits, ties in the high
    for (uint64_t j = c * kChunk + threadIdx.x; j < Min64(m, (c + 1) * kChunk);
         j += kChunkThreads) {
      const uint32_t d = src.Key(cand[j]) >> final_shift;
      packed += d > threshold ? 1u : (d == threshold ? 0x10000u : 0u);
    }
    const uint32_t total = Reduce(reduce_storage).Sum(packed);
    if (threadIdx.x == 0) counts[c] = ChunkCounts{total & 0xffffu, total >> 16};
    __syncthreads();  // reduce_storage is reused by the next chunk
  }
}

struct OutputSpec {
  uint32_t* indices;  // null: values only (random-k senders)
  uint8_t* values;    // null: indices only (random-k receivers)
  ValueFormat format;
  float* residual;  // null: no error feedback
};

__device__ inline void WriteStatsAndBand(const Plan* plan, uint64_t k, bool trivial,
                                         int final_shift, FusedStats* stats, ApproxTopKBand* band) {
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = plan->nonfinite;
  }
  if (band != nullptr) {  // approximate top-k: the band's key range and counts
    band->lower_key = trivial ? 0u : plan->prefix << final_shift;
    band->upper_key = trivial ? 0u : (plan->prefix + 1) << final_shift;
    band->above = trivial ? 0u : plan->above0;
    band->in_band = trivial ? 0u : plan->band0;
  }
}

// Writes the output; its first thread also writes stats and band (all
// known by now), saving a launch.
template <typename Source>
__global__ void __launch_bounds__(kChunkThreads)
    ChunkWriteKernel(Source src, const uint32_t* __restrict__ cand, int final_shift,
                     const ChunkCounts* __restrict__ before, OutputSpec out, const Plan* plan,
                     uint64_t k, FusedStats* stats, ApproxTopKBand* band) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    WriteStatsAndBand(plan, k, false, final_shift, stats, band);
  }
  using Scan = cub::BlockScan<uint32_t, kChunkThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const uint64_t m = static_cast<uint64_t>(plan->num_cand);
  const uint32_t threshold = plan->prefix;
  const unsigned long long need = plan->need;
  const uint64_t chunks = CeilDiv(m, kChunk);
  for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    uint32_t idx[kChunkItems];
    uint32_t flags[kChunkItems];
#pragma unroll
    for (int u = 0; u < kChunkItems; ++u) {
      const uint64_t j = c * kChunk + threadIdx.x * kChunkItems + u;  // blocked: keeps index order
      flags[u] = 0;
      idx[u] = 0;
      if (j < m) {
        idx[u] = cand[j];
        const uint32_t d = src.Key(idx[u]) >> final_shift;
        flags[u] = d > threshold ? 1u : (d == threshold ? 0x10000u : 0u);
      }
    }
    uint32_t excl[kChunkItems];
    Scan(scan_storage).ExclusiveSum(flags, excl);
    const unsigned long long a0 = before[c].above, t0 = before[c].ties;
#pragma unroll
    for (int u = 0; u < kChunkItems; ++u) {
      if (flags[u] == 0) continue;
      const unsigned long long ties_earlier = t0 + (excl[u] >> 16);
      if (flags[u] == 0x10000u && ties_earlier >= need) continue;
      const unsigned long long pos = a0 + (excl[u] & 0xffffu) + Min64(ties_earlier, need);
      const uint32_t i = idx[u];
      if (out.indices != nullptr) out.indices[pos] = i;
      if (out.values == nullptr) continue;  // indices only (random-k receivers)
      const float acc = src.Acc(i);
      StoreValue(out.values, pos, acc, out.format);
      if (out.residual != nullptr) {
        out.residual[i] = ResidualAfter(acc, RoundToFormat(acc, out.format));
      }
    }
    __syncthreads();  // scan_storage is reused by the next chunk
  }
}

// Raw acc left in the residual by level 0 becomes ResidualAfter(acc, 0):
// only non-finite values change (to 0). Skipped when there were none.
static __global__ void __launch_bounds__(kStreamThreads)
    FixNonFiniteKernel(float* __restrict__ residual, uint64_t n, const Plan* plan) {
  if (plan->nonfinite == 0) return;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (!IsFinite(residual[i])) residual[i] = 0.0f;
  }
}

static __global__ void FinishKernel(const Plan* plan, uint64_t k, bool trivial, int final_shift,
                                    FusedStats* stats, ApproxTopKBand* band) {
  WriteStatsAndBand(plan, k, trivial, final_shift, stats, band);
}

// k == 0 or k == n: no selection, one pass.
template <typename Loader>
__global__ void __launch_bounds__(kStreamThreads)
    AllOrNoneKernel(const Loader load, uint64_t n, bool all, OutputSpec out, Plan* plan) {
  uint32_t nonfinite = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float acc = load.Acc(load.Load(i));  // the residual is written once, below
    nonfinite += IsFinite(acc) ? 0u : 1u;
    float decoded = 0.0f;
    if (all) {
      if (out.indices != nullptr) out.indices[i] = static_cast<uint32_t>(i);
      if (out.values != nullptr) {
        StoreValue(out.values, i, acc, out.format);
        decoded = RoundToFormat(acc, out.format);
      }
    }
    if (out.residual != nullptr) out.residual[i] = ResidualAfter(acc, decoded);
  }
  AddBlockCount(&plan->nonfinite, nonfinite);
}

}  // namespace radix
}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_RADIX_KERNELS_CUH_
