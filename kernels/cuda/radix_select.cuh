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
//                 non-finite acc, and histograms the key's top digit
//                 (warp-aggregated shared atomics). Its grid is what fits
//                 on the GPU at once (one block per SM for 16-bit input,
//                 whose histogram takes 128 KB of shared memory).
//   2. Pick:      the last block of pass 1 to finish finds the digit
//                 holding the k-th largest key (no extra launch).
//   3. Candidates: one ordered, coalesced select over [0, n)
//                 (select_candidates.cuh) keeps, in index order, every
//                 element whose top digit is >= that digit (the selected
//                 ones and the band that holds the k-th): a second and
//                 last pass over n.
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

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cub/device/device_scan.cuh>
#include <string>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/cuda/radix_kernels.cuh"
#include "gradwire/kernels/cuda/select_candidates.cuh"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace radix {

// Temp layout, in 256-byte aligned pieces:
//   plan | hist[level 0] | hist[level 1] | hist[level 2] | tile status |
//   cand[n] | counts[max_chunks] | counts_before[max_chunks] | cub
// Everything up to the tile status is zeroed at the start of each call.
struct Layout {
  size_t plan, hist[3], status, zeroed, cand, counts, counts_before, cub, total;
};

inline size_t Align256(size_t x) { return (x + 255) / 256 * 256; }

inline absl::Status LayoutFor(uint64_t n, const Levels& levels, Layout* l) {
  const uint64_t max_chunks = std::max<uint64_t>(1, CeilDiv(n, kChunk));
  size_t off = 0;
  l->plan = off;
  off += Align256(sizeof(Plan));
  for (int L = 0; L < 3; ++L) {
    l->hist[L] = off;
    off += L < levels.count ? Align256(sizeof(unsigned long long) << levels.width[L]) : 0;
  }
  l->status = off;
  off += Align256(std::max<uint64_t>(1, CeilDiv(n, kSelectTile)) * sizeof(unsigned long long));
  l->zeroed = off;
  l->cand = off;
  off += Align256(std::max<uint64_t>(n, 1) * sizeof(uint32_t));
  l->counts = off;
  off += Align256(max_chunks * sizeof(ChunkCounts));
  l->counts_before = off;
  off += Align256(max_chunks * sizeof(ChunkCounts));
  size_t scan_bytes = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveScan(
      nullptr, scan_bytes, static_cast<ChunkCounts*>(nullptr), static_cast<ChunkCounts*>(nullptr),
      AddCounts{}, ChunkCounts{0, 0}, static_cast<int64_t>(max_chunks)));
  l->cub = off;
  off += Align256(scan_bytes);
  l->total = off;
  return absl::OkStatus();
}

// Blocks of `kernel` (with `smem` bytes of dynamic shared memory) that one
// SM holds at once, asked once per kernel and device; also allows `kernel`
// more than 48 KB of dynamic shared memory when it needs it.
template <typename Kernel>
absl::Status ResidentBlocks(Kernel kernel, int threads, size_t smem, int* blocks) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];  // 0: not asked yet
  int device = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < kMaxDevices;
  if (smem > 48 * 1024) {  // set on every call: cheap, and the launch needs it
    GRADWIRE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  if (cached && (*blocks = cache[device].load(std::memory_order_relaxed)) > 0) {
    return absl::OkStatus();
  }
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, smem));
  *blocks = std::max(*blocks, 1);
  if (cached) cache[device].store(*blocks, std::memory_order_relaxed);
  return absl::OkStatus();
}

// Runs the whole selection. `load` feeds pass 1 (it knows the data format
// and stores acc); `src` reads keys and acc afterwards. temp must hold
// LayoutFor(n).total bytes.
template <typename Source, typename Loader>
absl::Status RunSelection(void* temp, const Levels& levels, Source src, Loader load, uint64_t n,
                          uint64_t k, OutputSpec out, FusedStats* stats, ApproxTopKBand* band,
                          cudaStream_t stream) {
  Layout l;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(LayoutFor(n, levels, &l));
  int sms = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(MultiprocessorCount(&sms));
  char* base = static_cast<char*>(temp);
  Plan* plan = reinterpret_cast<Plan*>(base + l.plan);
  unsigned long long* hist[3];
  for (int L = 0; L < 3; ++L) hist[L] = reinterpret_cast<unsigned long long*>(base + l.hist[L]);
  auto* status = reinterpret_cast<unsigned long long*>(base + l.status);
  uint32_t* cand = reinterpret_cast<uint32_t*>(base + l.cand);
  auto* counts = reinterpret_cast<ChunkCounts*>(base + l.counts);
  auto* counts_before = reinterpret_cast<ChunkCounts*>(base + l.counts_before);
  void* cub_temp = base + l.cub;
  const uint64_t max_chunks = std::max<uint64_t>(1, CeilDiv(n, kChunk));
  unsigned stream_grid = 0;  // grid-stride passes over n: 4 blocks of 512 per SM at most
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(n, kStreamThreads, 4, &stream_grid));

  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base, 0, l.zeroed, stream));
  // Nothing or everything selected: one pass, no selection. (Approximate
  // top-k with k == n still runs the selection: it reports the band.)
  if (n == 0 || k == 0 || (k == n && band == nullptr)) {
    if (n != 0) {
      AllOrNoneKernel<<<stream_grid, kStreamThreads, 0, stream>>>(load, n, k == n, out, plan);
      GRADWIRE_CUDA_CHECK_LAUNCH("AllOrNoneKernel");
    }
    if (stats != nullptr || band != nullptr) {
      FinishKernel<<<1, 1, 0, stream>>>(plan, k, /*trivial=*/true, 0, stats, band);
      GRADWIRE_CUDA_CHECK_LAUNCH("FinishKernel");
    }
    return absl::OkStatus();
  }

  // 1. level 0 over n, as many blocks as are resident at once (each loops)
  const int bins0 = 1 << levels.width[0];
  const size_t smem0 = bins0 * sizeof(uint32_t);
  auto* level0 = &Level0Kernel<Loader>;
  int resident = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ResidentBlocks(level0, kStreamThreads, smem0, &resident));
  const unsigned grid0 = static_cast<unsigned>(std::max<uint64_t>(
      1, std::min<uint64_t>(CeilDiv(n, uint64_t{kStreamThreads} * Loader::kUnroll),
                            static_cast<uint64_t>(sms) * resident)));
  // 2. the band: picked by Level0's last block
  level0<<<grid0, kStreamThreads, smem0, stream>>>(load, n, levels.shift[0], bins0, levels.width[0],
                                                   k, hist[0], plan);
  GRADWIRE_CUDA_CHECK_LAUNCH("Level0Kernel");
  // 3. candidates, in index order
  const uint64_t tiles = CeilDiv(n, kSelectTile);
  SelectCandidatesKernel<Source><<<static_cast<unsigned>(tiles), kSelectThreads, 0, stream>>>(
      src, n, levels.shift[0], cand, status, plan);
  GRADWIRE_CUDA_CHECK_LAUNCH("SelectCandidatesKernel");
  // 4. lower digits over the candidates
  const unsigned cand_grid = sms * 2;
  for (int L = 1; L < levels.count; ++L) {
    const int bins = 1 << levels.width[L];
    CandidateHistKernel<Source><<<cand_grid, kStreamThreads, bins * sizeof(uint32_t), stream>>>(
        src, cand, levels.shift[L - 1], levels.shift[L], levels.width[L], L, k, hist[L], plan);
    GRADWIRE_CUDA_CHECK_LAUNCH("CandidateHistKernel");
  }
  // 5. output in index order
  const int final_shift = levels.shift[levels.count - 1];
  const unsigned chunk_grid =
      static_cast<unsigned>(std::min<uint64_t>(max_chunks, static_cast<uint64_t>(sms) * 8));
  ChunkCountKernel<Source>
      <<<chunk_grid, kChunkThreads, 0, stream>>>(src, cand, final_shift, max_chunks, counts, plan);
  GRADWIRE_CUDA_CHECK_LAUNCH("ChunkCountKernel");
  size_t cub_bytes = l.total - l.cub;
  GRADWIRE_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveScan(cub_temp, cub_bytes, counts, counts_before, AddCounts{},
                                     ChunkCounts{0, 0}, static_cast<int64_t>(max_chunks), stream));
  ChunkWriteKernel<Source><<<chunk_grid, kChunkThreads, 0, stream>>>(
      src, cand, final_shift, counts_before, out, plan, k, stats, band);
  GRADWIRE_CUDA_CHECK_LAUNCH("ChunkWriteKernel");
  // 6. non-finite residuals (ChunkWrite already wrote stats and band)
  if (out.residual != nullptr) {
    FixNonFiniteKernel<<<stream_grid, kStreamThreads, 0, stream>>>(out.residual, n, plan);
    GRADWIRE_CUDA_CHECK_LAUNCH("FixNonFiniteKernel");
  }
  return absl::OkStatus();
}

// Shape and null checks of a selection call (before anything is written).
inline absl::Status CheckShape(const char* who, uint64_t n, uint64_t k, ValueFormat format,
                               const void* grad, const uint32_t* indices, const uint8_t* values,
                               bool indices_optional = false) {
  if (format != ValueFormat::kFp32 && format != ValueFormat::kFp16 &&
      format != ValueFormat::kBf16) {
    return absl::InvalidArgumentError(std::string(who) + ": unknown value format");
  }
  if (k > n) return absl::InvalidArgumentError(std::string(who) + ": k > n");
  if (n > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(std::string(who) + ": n > 2^32 (u32 indices)");
  }
  if (n > 0 && grad == nullptr) {
    return absl::InvalidArgumentError(std::string(who) + ": grad is null");
  }
  if (k > 0 && ((indices == nullptr && !indices_optional) || values == nullptr)) {
    return absl::InvalidArgumentError(
        std::string(who) + (indices_optional ? ": values is null" : ": indices or values is null"));
  }
  return absl::OkStatus();
}

// The temp-storage query, then the size check.
inline absl::Status QueryOrCheck(const char* who, void* temp, uint64_t* temp_bytes, uint64_t n,
                                 const Levels& levels, bool* query_only) {
  if (temp_bytes == nullptr) {
    return absl::InvalidArgumentError(std::string(who) + ": temp_bytes is null");
  }
  Layout layout;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(LayoutFor(n, levels, &layout));
  *query_only = temp == nullptr;
  if (*query_only) {
    *temp_bytes = layout.total;
    return absl::OkStatus();
  }
  if (*temp_bytes < layout.total) {
    return absl::InvalidArgumentError(std::string(who) + ": temp storage too small");
  }
  return absl::OkStatus();
}

}  // namespace radix
}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_RADIX_SELECT_CUH_
