#include "gradwire/kernels/cpu/sparse_sum.h"

#include <algorithm>
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
// A chunk with at least len / kDenseScaleRatio entries is scaled whole
// (about half a cycle an element) rather than entry by entry through the
// bitmap (several cycles an entry).
constexpr uint64_t kDenseScaleRatio = 8;
constexpr uint64_t kPrezeroRatio = 32;

// Adds a payload's entries from j on whose index is below `end` into
// `chunk`, which holds out[c0, ...); returns where they stop.
template <ValueFormat kFormat>
uint64_t AddToChunk(const SparsePayload& run, uint64_t j, uint64_t c0, uint64_t end, float* chunk) {
  for (; j < run.count && run.indices[j] < end; ++j) {
    chunk[run.indices[j] - c0] += LoadValue(run.values, j, kFormat);
  }
  return j;
}

uint64_t AddToChunk(const SparsePayload& run, uint64_t j, uint64_t c0, uint64_t end, float* chunk) {
  switch (run.format) {
    case ValueFormat::kFp32:
      return AddToChunk<ValueFormat::kFp32>(run, j, c0, end, chunk);
    case ValueFormat::kFp16:
      return AddToChunk<ValueFormat::kFp16>(run, j, c0, end, chunk);
    case ValueFormat::kBf16:
      return AddToChunk<ValueFormat::kBf16>(run, j, c0, end, chunk);
  }
  return j;
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
// adds run across entries, vectorized) and stored once, divided, into the
// zeroed chunk: no load-add-store per payload, no touched bitmap.
template <ValueFormat kFormat>
void AverageSharedIndices(absl::Span<const SparsePayload> payloads, float divisor, float* out,
                          uint64_t n) {
  const uint32_t* indices = payloads[0].indices;
  const uint64_t k = payloads[0].count;
  float scale;
  const bool exact_scale = ExactReciprocal(divisor, &scale);
  if (k * payloads.size() * kPrezeroRatio < n) {
    // Sparse, by SparseAverage's rule: one memset of all of out, then each
    // entry's sum where it lands.
    std::memset(out, 0, n * sizeof(float));
    for (uint64_t j = 0; j < k; ++j) {
      float sum = 0.0f;
      for (const SparsePayload& run : payloads) sum += LoadValue(run.values, j, kFormat);
      out[indices[j]] = exact_scale ? sum * scale : sum / divisor;
    }
    return;
  }
  float sums[kChunk];
  uint64_t j = 0;
  for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
    const uint64_t len = std::min(n - c0, kChunk);
    float* chunk = out + c0;
    std::fill(chunk, chunk + len, 0.0f);
    uint64_t end = j;
    while (end < k && indices[end] < c0 + len) ++end;
    const uint64_t m = end - j;
    for (uint64_t e = 0; e < m; ++e) sums[e] = 0.0f;
    for (const SparsePayload& run : payloads) {
      for (uint64_t e = 0; e < m; ++e) sums[e] += LoadValue(run.values, j + e, kFormat);
    }
    for (uint64_t e = 0; e < m; ++e) {
      chunk[indices[j + e] - c0] = exact_scale ? sums[e] * scale : sums[e] / divisor;
    }
    j = end;
  }
}

}  // namespace

void SparseAverage(absl::Span<const SparsePayload> payloads, float divisor,
                   absl::Span<float> dense) {
  float* out = dense.data();
  const uint64_t n = dense.size();
  const uint64_t p = payloads.size();
  if (p > 1 && SharesOneIndexList(payloads)) {
    switch (payloads[0].format) {
      case ValueFormat::kFp32:
        return AverageSharedIndices<ValueFormat::kFp32>(payloads, divisor, out, n);
      case ValueFormat::kFp16:
        return AverageSharedIndices<ValueFormat::kFp16>(payloads, divisor, out, n);
      case ValueFormat::kBf16:
        return AverageSharedIndices<ValueFormat::kBf16>(payloads, divisor, out, n);
    }
  }
  float scale;
  const bool exact_scale = ExactReciprocal(divisor, &scale);
  // Per payload: where its entries for the current chunk begin and end (on
  // the stack for up to 16 payloads, as the callers' frame lists are).
  absl::InlinedVector<uint64_t, 16> begin(p, 0), end(p, 0);
  uint64_t touched[kChunk / 64];
  uint64_t total = 0;
  for (const SparsePayload& run : payloads) total += run.count;
  // Sparser than one entry in kPrezeroRatio elements: one memset of all of
  // out (fast string stores, no read of the old lines) beats zeroing chunk
  // by chunk, and the few lines entries land in are read back.
  const bool prezero = total * kPrezeroRatio < n;
  if (prezero) std::memset(out, 0, n * sizeof(float));
  for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
    const uint64_t len = std::min(n - c0, kChunk);
    float* chunk = out + c0;
    if (!prezero) std::fill(chunk, chunk + len, 0.0f);
    for (uint64_t r = 0; r < p; ++r) {
      end[r] = AddToChunk(payloads[r], begin[r], c0, c0 + len, chunk);
    }
    uint64_t entries = 0;
    for (uint64_t r = 0; r < p; ++r) entries += end[r] - begin[r];
    if (divisor == 1.0f || entries == 0) {
      // x / 1 == x, and an empty chunk is all +0: nothing to divide.
    } else if (exact_scale && entries * kDenseScaleRatio >= len) {
      // Untouched elements are +0, and +0 * scale == +0 / divisor: one
      // vectorized pass over the cached chunk beats finding the touched.
      for (uint64_t i = 0; i < len; ++i) chunk[i] *= scale;
    } else {
      // Each touched element once, although several payloads may hold it.
      std::fill(touched, touched + kChunk / 64, uint64_t{0});
      for (uint64_t r = 0; r < p; ++r) {
        for (uint64_t j = begin[r]; j < end[r]; ++j) {
          const uint64_t local = payloads[r].indices[j] - c0;
          const uint64_t bit = uint64_t{1} << (local & 63);
          if ((touched[local >> 6] & bit) != 0) continue;
          touched[local >> 6] |= bit;
          chunk[local] = exact_scale ? chunk[local] * scale : chunk[local] / divisor;
        }
      }
    }
    begin.swap(end);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
