// Device-side radix selection shared by exact top-k, approximate top-k and
// random-k (internal to kernels/cuda; included by .cu files only).
//
// Every selector orders elements by a u32 key (larger wins) and breaks ties
// by the lower index, i.e. by the composite (key, -index), which has no
// ties, so exactly k elements are chosen. The pipeline, all on one stream
// with no host synchronization (graph-capturable):
//
//   1. Level0:    one pass over n. Computes acc = grad (+ residual; with
//                 error feedback the raw acc is stored into the residual
//                 buffer so later passes read 4 bytes, not 8), counts
//                 non-finite acc, and histograms the key's top digit.
//   2. Pick:      the last block of pass 1 to finish finds the digit
//                 holding the k-th largest key (no extra launch).
//   3. Candidates: cub::DeviceSelect::If over [0, n) keeps, in index order,
//                 every element whose top digit is >= that digit (the
//                 selected ones and the band that holds the k-th): a second
//                 and last pass over n.
//   4. Levels:    more digits of the key, histogrammed over the candidates
//                 only (exact selection); approximate selection stops at
//                 the top digit.
//   5. Output:    per-chunk counts over the candidates, one exclusive scan,
//                 then a block-scan write: selected = key above the
//                 threshold, or equal to it among the first `need` such
//                 elements in index order. Writes indices (ascending),
//                 values and the selected elements' residual.
//   6. Fix-up:    non-finite raw acc left in the residual becomes 0
//                 (ResidualAfter); exits at once when there was none.
//
// Bytes: without error feedback 2 reads of n plus O(candidates); with it
// 12n (level 0) + 4n (candidates) + O(candidates).
#ifndef GRADWIRE_KERNELS_CUDA_RADIX_SELECT_CUH_
#define GRADWIRE_KERNELS_CUDA_RADIX_SELECT_CUH_

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <string>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/stream.h"
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
constexpr int kMaxBins = 1 << 15;

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
  long long num_cand;            // written by DeviceSelect
  uint32_t prefix;               // key >> shift[level] of the k-th element, so far
  unsigned int tickets[3];       // blocks done with each level's histogram
};

__host__ __device__ inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline uint64_t Min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// ------------------------------------------------------------- sources --
// A source gives, for element i, its key (after level 0 has run) and acc.

// fp32 magnitudes from `acc` (the gradient, or the residual buffer holding
// the raw acc after level 0).
struct MagnitudeSource {
  const float* acc;
  __device__ uint32_t Key(uint64_t i) const { return MagnitudeKey(acc[i]); }
  __device__ float Acc(uint64_t i) const { return acc[i]; }
};

// 16-bit gradients: the key is the 15 magnitude bits + 1, NaN 0; it orders
// exactly as MagnitudeKey of the widened value.
struct Half16Source {
  const uint16_t* bits;
  bool bf16;
  __device__ uint32_t Key(uint64_t i) const {
    const uint32_t a = bits[i] & 0x7fffu;
    const uint32_t inf = bf16 ? 0x7f80u : 0x7c00u;
    return a > inf ? 0u : a + 1u;
  }
  __device__ float Acc(uint64_t i) const {
    return bf16 ? Bf16BitsToFloat(bits[i]) : HalfBitsToFloat(bits[i]);
  }
};

// Random-k: the smallest RandomKKey wins, so the key is its complement.
// `acc` may be null (index generation only).
struct RandomSource {
  uint64_t stream_key;
  const float* acc;
  __device__ uint32_t Key(uint64_t i) const { return ~RandomKKey(stream_key, i); }
  __device__ float Acc(uint64_t i) const { return acc[i]; }
};

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

// ------------------------------------------------------------- level 0 --
// Loader for level 0: reads grad (and residual), stores raw acc into the
// residual when fusing error feedback, returns acc.
struct FloatLoader {
  static constexpr int kUnroll = 4;
  const float* grad;
  float* residual;  // null: no error feedback
  __device__ float operator()(uint64_t i) const {
    if (residual == nullptr) return grad[i];
    const float acc = grad[i] + residual[i];
    residual[i] = acc;
    return acc;
  }
};

template <typename KeyOfAcc, typename Loader>
__global__ void __launch_bounds__(kStreamThreads)
    Level0Kernel(Loader load, KeyOfAcc key_of, uint64_t n, int shift, int bins, int width,
                 unsigned long long k, unsigned long long* __restrict__ hist, Plan* plan) {
  extern __shared__ uint32_t shist[];
  __shared__ PickScan::TempStorage pick_storage;
  __shared__ unsigned long long block_nonfinite;
  for (int b = threadIdx.x; b < bins; b += blockDim.x) shist[b] = 0;
  if (threadIdx.x == 0) block_nonfinite = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  // kUnroll independent loads in flight per thread before the first use.
  constexpr int kU = Loader::kUnroll;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x * kU;
  for (uint64_t i0 = static_cast<uint64_t>(blockIdx.x) * blockDim.x * kU + threadIdx.x; i0 < n;
       i0 += stride) {
    float acc[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint64_t i = i0 + static_cast<uint64_t>(u) * blockDim.x;
      if (i < n) acc[u] = load(i);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint64_t i = i0 + static_cast<uint64_t>(u) * blockDim.x;
      if (i < n) {
        nonfinite += IsFinite(acc[u]) ? 0u : 1u;
        atomicAdd(&shist[key_of(i, acc[u]) >> shift], 1u);
      }
    }
  }
  if (nonfinite != 0) atomicAdd(&block_nonfinite, static_cast<unsigned long long>(nonfinite));
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (shist[b] != 0) atomicAdd(&hist[b], static_cast<unsigned long long>(shist[b]));
  }
  if (threadIdx.x == 0 && block_nonfinite != 0) atomicAdd(&plan->nonfinite, block_nonfinite);
  if (LastBlockDone(&plan->tickets[0])) PickDigit(hist, bins, width, 0, k, plan, pick_storage);
}

struct MagnitudeOfAcc {
  __device__ uint32_t operator()(uint64_t, float acc) const { return MagnitudeKey(acc); }
};
struct RandomOfIndex {
  uint64_t stream_key;
  __device__ uint32_t operator()(uint64_t i, float) const { return ~RandomKKey(stream_key, i); }
};
struct NoLoad {
  static constexpr int kUnroll = 4;
  __device__ float operator()(uint64_t) const { return 0.0f; }
};
// 2-byte loads and one 128 KB-histogram block per SM: more loads in flight
// per thread to cover memory latency.
struct Half16Loader {
  static constexpr int kUnroll = 16;
  Half16Source src;
  __device__ float operator()(uint64_t i) const { return src.Acc(i); }
};
struct Half16KeyOfIndex {
  Half16Source src;
  __device__ uint32_t operator()(uint64_t i, float) const { return src.Key(i); }
};

// ------------------------------------------------------ candidate pass --
template <typename Source>
struct AtOrAboveTopDigit {
  Source src;
  int shift;
  const Plan* plan;
  __device__ bool operator()(uint32_t i) const { return (src.Key(i) >> shift) >= plan->prefix; }
};

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
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint32_t key = src.Key(cand[j]);
    if ((key >> prev_shift) == prefix) atomicAdd(&shist[(key >> shift) & mask], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (shist[b] != 0) atomicAdd(&hist[b], static_cast<unsigned long long>(shist[b]));
  }
  if (LastBlockDone(&plan->tickets[level]))
    PickDigit(hist, bins, width, level, k, plan, pick_storage);
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
    if (threadIdx.x == 0) {
      counts[c] = ChunkCounts{total & 0xffffu, total >> 16};
    }
    __syncthreads();  // reduce_storage is reused by the next chunk
  }
}

struct OutputSpec {
  uint32_t* indices;
  uint8_t* values;  // null: indices only
  ValueFormat format;
  float* residual;  // null: no error feedback
};

__device__ inline void WriteStatsAndBand(const Plan* plan, uint64_t k, bool trivial,
                                         int final_shift, FusedStats* stats, ApproxTopKBand* band);

// Writes the output; its first thread also writes stats and band (all
// known by now), saving a launch.
template <typename Source>
__global__ void __launch_bounds__(kChunkThreads)
    ChunkWriteKernel(Source src, const uint32_t* __restrict__ cand, int final_shift,
                     const ChunkCounts* __restrict__ before, OutputSpec out, const Plan* plan,
                     uint64_t k, FusedStats* stats, ApproxTopKBand* band) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    WriteStatsAndBand(plan, k, false, final_shift, stats, band);
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
      out.indices[pos] = i;
      if (out.values == nullptr) continue;  // indices only (random-k receivers)
      const float acc = src.Acc(i);
      StoreValue(out.values, pos, acc, out.format);
      if (out.residual != nullptr)
        out.residual[i] = ResidualAfter(acc, RoundToFormat(acc, out.format));
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

static __global__ void FinishKernel(const Plan* plan, uint64_t k, bool trivial, int final_shift,
                                    FusedStats* stats, ApproxTopKBand* band) {
  WriteStatsAndBand(plan, k, trivial, final_shift, stats, band);
}

// k == 0 or k == n: no selection, one pass.
template <typename Loader>
__global__ void __launch_bounds__(kStreamThreads)
    AllOrNoneKernel(Loader load, uint64_t n, bool all, OutputSpec out, Plan* plan) {
  __shared__ unsigned long long block_nonfinite;
  if (threadIdx.x == 0) block_nonfinite = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float acc = load(i);
    nonfinite += IsFinite(acc) ? 0u : 1u;
    float decoded = 0.0f;
    if (all) {
      out.indices[i] = static_cast<uint32_t>(i);
      if (out.values != nullptr) {
        StoreValue(out.values, i, acc, out.format);
        decoded = RoundToFormat(acc, out.format);
      }
    }
    if (out.residual != nullptr) out.residual[i] = ResidualAfter(acc, decoded);
  }
  if (nonfinite != 0) atomicAdd(&block_nonfinite, static_cast<unsigned long long>(nonfinite));
  __syncthreads();
  if (threadIdx.x == 0 && block_nonfinite != 0) atomicAdd(&plan->nonfinite, block_nonfinite);
}

// ------------------------------------------------------------ the call --
// Temp layout, in 256-byte aligned pieces:
//   plan | hist[level 0] | hist[level 1] | hist[level 2] | cand[n] |
//   counts[max_chunks] | counts_before[max_chunks] | cub
struct Layout {
  size_t plan, hist[3], cand, counts, counts_before, cub, total, zeroed;
};

inline size_t Align256(size_t x) { return (x + 255) / 256 * 256; }

template <typename Source>
absl::Status LayoutFor(uint64_t n, const Levels& levels, Layout* l) {
  const uint64_t max_chunks = std::max<uint64_t>(1, CeilDiv(n, kChunk));
  size_t off = 0;
  l->plan = off;
  off += Align256(sizeof(Plan));
  for (int L = 0; L < 3; ++L) {
    l->hist[L] = off;
    off += L < levels.count ? Align256(sizeof(unsigned long long) << levels.width[L]) : 0;
  }
  l->zeroed = off;  // plan + histograms are cleared at the start of each call
  l->cand = off;
  off += Align256(std::max<uint64_t>(n, 1) * sizeof(uint32_t));
  l->counts = off;
  off += Align256(max_chunks * sizeof(ChunkCounts));
  l->counts_before = off;
  off += Align256(max_chunks * sizeof(ChunkCounts));
  size_t select_bytes = 0, scan_bytes = 0;
  AtOrAboveTopDigit<Source> pred{Source{}, 0, nullptr};
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cub::DeviceSelect::If(nullptr, select_bytes, thrust::counting_iterator<uint32_t>(0),
                            static_cast<uint32_t*>(nullptr), static_cast<long long*>(nullptr),
                            static_cast<int64_t>(std::max<uint64_t>(n, 1)), pred));
  GRADWIRE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveScan(
      nullptr, scan_bytes, static_cast<ChunkCounts*>(nullptr), static_cast<ChunkCounts*>(nullptr),
      AddCounts{}, ChunkCounts{0, 0}, static_cast<int64_t>(max_chunks)));
  l->cub = off;
  off += Align256(std::max(select_bytes, scan_bytes));
  l->total = off;
  return absl::OkStatus();
}

struct DeviceShape {
  int sms = 0;
};

inline absl::Status GetShape(DeviceShape* shape) {
  int device = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&shape->sms, cudaDevAttrMultiProcessorCount, device));
  return absl::OkStatus();
}

inline unsigned StreamGrid(const DeviceShape& shape, uint64_t work) {
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>(CeilDiv(work, kStreamThreads), shape.sms * 4ull)));
}

// Runs the whole selection. `level0` launches pass 1 (it knows the data
// format); `src` reads keys and acc afterwards. temp must hold
// LayoutFor(n).total bytes.
template <typename Source, typename KeyOfAcc, typename Loader>
absl::Status RunSelection(void* temp, const Levels& levels, Source src, Loader load,
                          KeyOfAcc key_of, uint64_t n, uint64_t k, OutputSpec out,
                          FusedStats* stats, ApproxTopKBand* band, cudaStream_t stream) {
  Layout l;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(LayoutFor<Source>(n, levels, &l));
  DeviceShape shape;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GetShape(&shape));
  char* base = static_cast<char*>(temp);
  Plan* plan = reinterpret_cast<Plan*>(base + l.plan);
  unsigned long long* hist[3];
  for (int L = 0; L < 3; ++L) hist[L] = reinterpret_cast<unsigned long long*>(base + l.hist[L]);
  uint32_t* cand = reinterpret_cast<uint32_t*>(base + l.cand);
  auto* counts = reinterpret_cast<ChunkCounts*>(base + l.counts);
  auto* counts_before = reinterpret_cast<ChunkCounts*>(base + l.counts_before);
  void* cub_temp = base + l.cub;
  const uint64_t max_chunks = std::max<uint64_t>(1, CeilDiv(n, kChunk));

  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base, 0, l.zeroed, stream));
  // Nothing or everything selected: one pass, no selection. (Approximate
  // top-k with k == n still runs the selection: it reports the band.)
  if (n == 0 || k == 0 || (k == n && band == nullptr)) {
    if (n != 0) {
      AllOrNoneKernel<<<StreamGrid(shape, n), kStreamThreads, 0, stream>>>(load, n, k == n, out,
                                                                           plan);
      GRADWIRE_CUDA_CHECK_LAUNCH("AllOrNoneKernel");
    }
    if (stats != nullptr || band != nullptr) {
      FinishKernel<<<1, 1, 0, stream>>>(plan, k, /*trivial=*/true, 0, stats, band);
      GRADWIRE_CUDA_CHECK_LAUNCH("FinishKernel");
    }
    return absl::OkStatus();
  }

  // 1. level 0 over n
  const int bins0 = 1 << levels.width[0];
  const size_t smem0 = bins0 * sizeof(uint32_t);
  auto* level0 = &Level0Kernel<KeyOfAcc, Loader>;
  if (smem0 > 48 * 1024) {
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        level0, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem0)));
  }
  // 2. the band: picked by Level0's last block
  level0<<<StreamGrid(shape, n), kStreamThreads, smem0, stream>>>(
      load, key_of, n, levels.shift[0], bins0, levels.width[0], k, hist[0], plan);
  GRADWIRE_CUDA_CHECK_LAUNCH("Level0Kernel");
  // 3. candidates, in index order
  size_t cub_bytes = l.total - l.cub;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cub::DeviceSelect::If(
      cub_temp, cub_bytes, thrust::counting_iterator<uint32_t>(0), cand, &plan->num_cand,
      static_cast<int64_t>(n), AtOrAboveTopDigit<Source>{src, levels.shift[0], plan}, stream));
  // 4. lower digits over the candidates
  const unsigned cand_grid = shape.sms * 2;
  for (int L = 1; L < levels.count; ++L) {
    const int bins = 1 << levels.width[L];
    CandidateHistKernel<Source><<<cand_grid, kStreamThreads, bins * sizeof(uint32_t), stream>>>(
        src, cand, levels.shift[L - 1], levels.shift[L], levels.width[L], L, k, hist[L], plan);
    GRADWIRE_CUDA_CHECK_LAUNCH("CandidateHistKernel");
  }
  // 5. output in index order
  const int final_shift = levels.shift[levels.count - 1];
  const unsigned chunk_grid =
      static_cast<unsigned>(std::min<uint64_t>(max_chunks, shape.sms * 8ull));
  ChunkCountKernel<Source>
      <<<chunk_grid, kChunkThreads, 0, stream>>>(src, cand, final_shift, max_chunks, counts, plan);
  GRADWIRE_CUDA_CHECK_LAUNCH("ChunkCountKernel");
  cub_bytes = l.total - l.cub;
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveScan(cub_temp, cub_bytes, counts, counts_before, AddCounts{},
                                     ChunkCounts{0, 0}, static_cast<int64_t>(max_chunks), stream));
  ChunkWriteKernel<Source><<<chunk_grid, kChunkThreads, 0, stream>>>(
      src, cand, final_shift, counts_before, out, plan, k, stats, band);
  GRADWIRE_CUDA_CHECK_LAUNCH("ChunkWriteKernel");
  // 6. non-finite residuals (ChunkWrite already wrote stats and band)
  if (out.residual != nullptr) {
    FixNonFiniteKernel<<<StreamGrid(shape, n), kStreamThreads, 0, stream>>>(out.residual, n, plan);
    GRADWIRE_CUDA_CHECK_LAUNCH("FixNonFiniteKernel");
  }
  return absl::OkStatus();
}

// Shape and null checks of a selection call.
inline absl::Status CheckShape(const char* who, uint64_t n, uint64_t k, const void* grad,
                               const uint32_t* indices, const uint8_t* values) {
  if (k > n) return absl::InvalidArgumentError(std::string(who) + ": k > n");
  if (n > (uint64_t{1} << 32))
    return absl::InvalidArgumentError(std::string(who) + ": n > 2^32 (u32 indices)");
  if (n > 0 && grad == nullptr)
    return absl::InvalidArgumentError(std::string(who) + ": grad is null");
  if (k > 0 && (indices == nullptr || values == nullptr)) {
    return absl::InvalidArgumentError(std::string(who) + ": indices or values is null");
  }
  return absl::OkStatus();
}

// The temp-storage query, then the size check.
template <typename Source>
absl::Status QueryOrCheck(const char* who, void* temp, uint64_t* temp_bytes, uint64_t n,
                          const Levels& levels, bool* query_only) {
  if (temp_bytes == nullptr)
    return absl::InvalidArgumentError(std::string(who) + ": temp_bytes is null");
  Layout layout;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(LayoutFor<Source>(n, levels, &layout));
  *query_only = temp == nullptr;
  if (*query_only) {
    *temp_bytes = layout.total;
    return absl::OkStatus();
  }
  if (*temp_bytes < layout.total)
    return absl::InvalidArgumentError(std::string(who) + ": temp storage too small");
  return absl::OkStatus();
}

}  // namespace radix
}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_RADIX_SELECT_CUH_
