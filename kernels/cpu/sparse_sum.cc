#include "gradwire/kernels/cpu/sparse_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/container/inlined_vector.h"
#include "gradwire/kernels/cpu/divide_x86.h"

namespace gradwire {
namespace kernels {
namespace cpu {
absl::Status SparseSumToDense(absl::Span<const SparsePayload> payloads, absl::Span<float> dense,
                              const SparseSumOptions& options) {
  const uint64_t n = dense.size();
  for (size_t w = 0; w < payloads.size(); ++w) {
    const SparsePayload& p = payloads[w];
    const std::string who = "SparseSumToDense: worker " + std::to_string(w);
    if (p.count > n) return absl::InvalidArgumentError(who + " has more entries than n");
    if (p.count > 0 && (p.indices == nullptr || p.values == nullptr)) {
      return absl::InvalidArgumentError(who + " has null buffers");
    }
    if (p.format != ValueFormat::kFp32 && p.format != ValueFormat::kFp16 &&
        p.format != ValueFormat::kBf16) {
      return absl::InvalidArgumentError(who + " has an unknown value type");
    }
    for (uint64_t j = 0; j < p.count; ++j) {
      if (p.indices[j] >= n) return absl::InvalidArgumentError(who + ": index out of range");
      if (j > 0 && p.indices[j] <= p.indices[j - 1]) {
        return absl::InvalidArgumentError(who + ": indices not strictly increasing");
      }
    }
  }
  if (!options.accumulate) std::memset(dense.data(), 0, n * sizeof(float));
  for (const SparsePayload& p : payloads) {
    for (uint64_t j = 0; j < p.count; ++j) dense[p.indices[j]] += LoadValue(p.values, j, p.format);
  }
  for (float& x : dense) x *= options.scale;
  return absl::OkStatus();
}

namespace {

constexpr uint64_t kChunk = 4096;  // 16 KiB of out: stays in L1
// With streaming stores a dense chunk is summed and stored a quarter at a
// time (4 KiB of out): the frames' reads and out's streaming stores then
// alternate in shorter bursts. On a Zen 5 core, ResNet-50's average of
// four frames at 10 % took about a tenth less time than with whole chunks
// (docs/results/2026-11-29-stream-slices.md); slices of 512 and 2048
// were slower than 1024 in the A/Bs of four rounds.
constexpr uint64_t kStreamSlice = 1024;
// A chunk with at least len / kDenseRatio entries is written by one pass
// over all of it (about half a cycle an element); a sparser one is zeroed
// by memset and its touched elements are stored one by one.
constexpr uint64_t kDenseRatio = 8;
// An average with fewer than one entry (all payloads together) in
// kPrezeroRatio elements zeroes all of out first. On the Intel VM, four
// frames over 25.6M elements: zeroing first was 2-3 % faster at 250
// elements an entry (0.1 % a frame) and 3-20 % slower at 167, 125, 83 and
// 50; 32 had it zero first at all of them
// (docs/results/2026-12-05-prezero-ratio.md).
constexpr uint64_t kPrezeroRatio = 200;
// The same test in AverageSharedIndices (one index list shared by every
// payload: k elements touched for k * p entries), not re-measured.
constexpr uint64_t kSharedPrezeroRatio = 32;

// The first j' >= j whose index is >= end (or run.count): the entries
// [j, j') of `run` fall below `end`. A linear scan, sixteen indices (one
// cache line) a step while the last of them is below `end` (indices
// ascend, so then all are), then one at a time: the adds that follow read
// the same indices, which it brings into L1.
uint64_t EntriesBelow(const SparsePayload& run, uint64_t j, uint64_t end) {
  constexpr uint64_t kStep = 16;
  while (j + kStep <= run.count && run.indices[j + kStep - 1] < end) j += kStep;
  if (j + kStep <= run.count) {
    // The sixteenth is at or past `end`: the entries below it are counted
    // without a branch on each (a loop's exit here mispredicts once a call).
    uint64_t below = 0;
    for (uint64_t e = 0; e < kStep; ++e) below += run.indices[j + e] < end;
    return j + below;
  }
  while (j < run.count && run.indices[j] < end) ++j;
  return j;
}

// Adds `run`'s entries [j, stop) into `chunk`, which holds out[c0, ...).
template <ValueFormat kFormat>
void AddToChunk(const SparsePayload& run, uint64_t j, uint64_t stop, uint64_t c0, float* chunk) {
  for (; j < stop; ++j) chunk[run.indices[j] - c0] += LoadValue(run.values, j, kFormat);
}

void AddToChunk(const SparsePayload& run, uint64_t j, uint64_t stop, uint64_t c0, float* chunk) {
  switch (run.format) {
    case ValueFormat::kFp32:
      return AddToChunk<ValueFormat::kFp32>(run, j, stop, c0, chunk);
    case ValueFormat::kFp16:
      return AddToChunk<ValueFormat::kFp16>(run, j, stop, c0, chunk);
    case ValueFormat::kBf16:
      return AddToChunk<ValueFormat::kBf16>(run, j, stop, c0, chunk);
  }
}

// out[0, len) = acc[0, len), then acc = +0. Both are in L1 after the
// adds, so this runs at the speed of out's stores.
void WriteChunk(float* acc, float* out, uint64_t len) {
  std::memcpy(out, acc, len * sizeof(float));
  std::memset(acc, 0, len * sizeof(float));
}

// Whether every payload holds the same index list (random-k frames of one
// step) in the same format: the same pointer, or equal contents.
bool SharesOneIndexList(absl::Span<const SparsePayload> payloads) {
  const SparsePayload& first = payloads[0];
  for (const SparsePayload& run : payloads) {
    if (run.count != first.count || run.format != first.format) return false;
    if (run.indices != first.indices &&
        std::memcmp(run.indices, first.indices, first.count * sizeof(uint32_t)) != 0) {
      return false;
    }
  }
  return true;
}

// SparseAverage when the payloads share one index list: each entry's sum
// (((0 + v_0) + v_1) + ...) is formed in order in a small buffer (the
// adds run across entries, vectorized) and stored once where it lands:
// no load-add-store per payload, no touched bitmap.
template <ValueFormat kFormat>
void AverageSharedIndices(absl::Span<const SparsePayload> payloads, float divisor, float* out,
                          uint64_t n, OutStores stores) {
  const uint32_t* indices = payloads[0].indices;
  const uint64_t k = payloads[0].count;
  float scale;
  const bool exact_scale = ExactReciprocal(divisor, &scale);
  if (k * payloads.size() * kSharedPrezeroRatio < n) {
    // Sparse, by SparseAverage's rule: all of out zeroed at once
    // (ZeroFloats), then each entry's sum where it lands.
    ZeroFloats(out, n, stores);
    for (uint64_t j = 0; j < k; ++j) {
      float sum = 0.0f;
      for (const SparsePayload& run : payloads) sum += LoadValue(run.values, j, kFormat);
      out[indices[j]] = exact_scale ? sum * scale : sum / divisor;
    }
    return;
  }
  // Denser: each chunk's sums are stored (in index order) into `acc`, a
  // chunk-sized buffer in L1 that is +0 between chunks, and leave it
  // divided (DivideAllInto) or, for a divisor DivideAll does not take,
  // divided one by one and copied: out's chunk is stored once, in order.
  const bool divide_all = DividesAll(divisor);
  alignas(64) float acc[kChunk];
  std::fill(acc, acc + kChunk, 0.0f);
  float sums[kChunk];
  uint64_t j = 0;
  for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
    const uint64_t len = std::min(n - c0, kChunk);
    const uint64_t end = EntriesBelow(payloads[0], j, c0 + len);
    const uint64_t m = end - j;
    for (uint64_t e = 0; e < m; ++e) sums[e] = 0.0f;
    for (const SparsePayload& run : payloads) {
      for (uint64_t e = 0; e < m; ++e) sums[e] += LoadValue(run.values, j + e, kFormat);
    }
    if (divide_all) {
      for (uint64_t e = 0; e < m; ++e) acc[indices[j + e] - c0] = sums[e];
      DivideAllInto(acc, out + c0, len, divisor, stores);
    } else {
      for (uint64_t e = 0; e < m; ++e) {
        acc[indices[j + e] - c0] = exact_scale ? sums[e] * scale : sums[e] / divisor;
      }
      WriteChunk(acc, out + c0, len);
    }
    j = end;
  }
}

// Each element of out[c0, ...) that payloads' entries [begin, end) touch,
// divided once (several payloads may hold it); the rest stay +0.
void DivideTouched(absl::Span<const SparsePayload> payloads, absl::Span<const uint64_t> begin,
                   absl::Span<const uint64_t> end, uint64_t c0, float divisor, float* chunk) {
  float scale;
  const bool exact_scale = ExactReciprocal(divisor, &scale);
  uint64_t touched[kChunk / 64] = {};
  for (uint64_t r = 0; r < payloads.size(); ++r) {
    for (uint64_t j = begin[r]; j < end[r]; ++j) {
      const uint64_t local = payloads[r].indices[j] - c0;
      const uint64_t bit = uint64_t{1} << (local & 63);
      if ((touched[local >> 6] & bit) != 0) continue;
      touched[local >> 6] |= bit;
      chunk[local] = exact_scale ? chunk[local] * scale : chunk[local] / divisor;
    }
  }
}

// The average into out[0, n).
void SparseAverageInto(absl::Span<const SparsePayload> payloads, float divisor, float* out,
                       uint64_t n, OutStores stores) {
  const uint64_t p = payloads.size();
  if (p > 1 && SharesOneIndexList(payloads)) {
    switch (payloads[0].format) {
      case ValueFormat::kFp32:
        return AverageSharedIndices<ValueFormat::kFp32>(payloads, divisor, out, n, stores);
      case ValueFormat::kFp16:
        return AverageSharedIndices<ValueFormat::kFp16>(payloads, divisor, out, n, stores);
      case ValueFormat::kBf16:
        return AverageSharedIndices<ValueFormat::kBf16>(payloads, divisor, out, n, stores);
    }
  }
  // Per payload: where its entries for the current chunk begin and end (on
  // the stack for up to 16 payloads, as the callers' frame lists are).
  absl::InlinedVector<uint64_t, 16> begin(p, 0), end(p, 0);
  uint64_t total = 0;
  for (const SparsePayload& run : payloads) total += run.count;
  // Sparser than one entry in kPrezeroRatio elements: zeroing all of out
  // at once (ZeroFloats: streaming stores when out streams, else memset;
  // no read of the old lines either way) beats zeroing chunk by chunk,
  // and the few lines entries land in are read back.
  const bool prezero = total * kPrezeroRatio < n;
  if (prezero) ZeroFloats(out, n, stores);
  // A chunk with few entries is zeroed (unless out was), gets its entries
  // added in place and its touched elements divided. In a denser one the
  // sums form in `acc`, a chunk-sized buffer that stays in L1 (zero
  // between chunks), and leave it for out in one pass that divides them
  // (DivideAllInto, vectorized, when DividesAll(divisor)): out's chunk is
  // stored once, never zeroed first or read back (by `stores`). Any other
  // divisor divides the touched only, after a plain copy. With streaming
  // stores (and DividesAll) a sparse chunk takes the buffer too, unless
  // all of out was zeroed first: zeroing out's chunk in place would read
  // its lines from memory first, which costs
  // more than a pass over the buffer (top-k's selections crowd into a
  // few layers, so most chunks of a large average are empty).
  const bool divide_all = DividesAll(divisor);
  const bool in_place_if_sparse = !(divide_all && stores == OutStores::kStreaming);
  alignas(64) float acc[kChunk];
  std::fill(acc, acc + kChunk, 0.0f);
  // Dense on average under streaming stores (a chunk's share of the
  // entries would make it a dense chunk): every chunk goes slice by slice
  // without a scan of the whole chunk first, each slice's entries found by
  // the scan its adds follow (a chunk scan and then a slice scan cost
  // 3-5 % of top-k 10 %'s average on an Intel core:
  // docs/results/2026-12-04-slice-scans.md).
  const bool slice_all = !in_place_if_sparse && total * kDenseRatio >= n;
  for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
    const uint64_t len = std::min(n - c0, kChunk);
    uint64_t entries = 0;
    for (uint64_t r = 0; r < p && !slice_all; ++r) {
      end[r] = EntriesBelow(payloads[r], begin[r], c0 + len);
      entries += end[r] - begin[r];
    }
    float* chunk = out + c0;
    if (prezero || (in_place_if_sparse && entries * kDenseRatio < len)) {
      if (!prezero) std::memset(chunk, 0, len * sizeof(float));
      for (uint64_t r = 0; r < p; ++r) AddToChunk(payloads[r], begin[r], end[r], c0, chunk);
      // x / 1 == x, and an untouched element stays +0.
      if (divisor != 1.0f && entries > 0) DivideTouched(payloads, begin, end, c0, divisor, chunk);
      begin.swap(end);
    } else if (divide_all) {
      // Summed in acc and divided on the way out, slice by slice: the
      // whole chunk, or kStreamSlice at a time for a dense chunk under
      // streaming stores. A slice's entries end at or before the chunk's,
      // so `begin` walks to the chunk's end (the last slice's end is end's
      // where the chunk was scanned).
      const bool sliced =
          slice_all || (stores == OutStores::kStreaming && entries * kDenseRatio >= len);
      const uint64_t slice = sliced ? kStreamSlice : len;
      for (uint64_t s0 = c0; s0 < c0 + len; s0 += slice) {
        const uint64_t slice_end = std::min(c0 + len, s0 + slice);
        for (uint64_t r = 0; r < p; ++r) {
          const uint64_t stop = slice_end == c0 + len && !slice_all
                                    ? end[r]
                                    : EntriesBelow(payloads[r], begin[r], slice_end);
          AddToChunk(payloads[r], begin[r], stop, s0, acc);
          begin[r] = stop;
        }
        DivideAllInto(acc, out + s0, slice_end - s0, divisor, stores);
      }
    } else {
      // Any other divisor: a plain copy, then the touched divided.
      for (uint64_t r = 0; r < p; ++r) AddToChunk(payloads[r], begin[r], end[r], c0, acc);
      WriteChunk(acc, chunk, len);
      if (divisor != 1.0f) DivideTouched(payloads, begin, end, c0, divisor, chunk);
      begin.swap(end);
    }
  }
}

}  // namespace

void SparseAverage(absl::Span<const SparsePayload> payloads, float divisor,
                   absl::Span<float> dense) {
  SparseAverage(payloads, divisor, dense, StoresFor(dense.size() * sizeof(float)));
}

void SparseAverage(absl::Span<const SparsePayload> payloads, float divisor, absl::Span<float> dense,
                   OutStores stores) {
  SparseAverageInto(payloads, divisor, dense.data(), dense.size(), stores);
  if (stores == OutStores::kStreaming) StreamingFence();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
