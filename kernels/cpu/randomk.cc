#include "gradwire/kernels/cpu/randomk.h"

#include <string.h>

#include "gradwire/kernels/cpu/radix_select.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

using internal::kTopBins;
using internal::kTopShift;

// Selection takes the largest keys; random-k wants the smallest hashes.
struct InvertedHashKey {
  uint64_t stream_key;
  uint32_t operator()(uint64_t i) const { return ~RandomKKey(stream_key, i); }
};

// Selects the k indices into `indices` (ascending). `hist` must already
// hold the histogram of InvertedHashKey bins over all n.
void SelectFromHistogram(const internal::SelectTemp& t, const InvertedHashKey& key, uint64_t n,
                         uint64_t k, uint32_t* indices) {
  if (k == n) {
    // Everything: no need to look at keys.
    for (uint64_t i = 0; i < n; ++i) indices[i] = static_cast<uint32_t>(i);
    return;
  }
  const internal::BinPick pick = internal::PickBin(t.hist, kTopBins, k);
  const uint64_t m = internal::CollectCandidates(key, n, pick.bin, t.candidates);
  const internal::Threshold th =
      internal::RefineThreshold(key, t.candidates, m, pick.bin, k - pick.above);
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t c = 0; c < m; ++c) {
    const uint32_t idx = t.candidates[c];
    const uint32_t kk = key(idx);
    if (kk > th.key || (kk == th.key && taken_equal++ < th.take_equal)) indices[j++] = idx;
  }
}

void HashHistogram(const InvertedHashKey& key, uint64_t n, uint64_t* hist) {
  memset(hist, 0, kTopBins * sizeof(uint64_t));
  for (uint64_t i = 0; i < n; ++i) ++hist[key(i) >> kTopShift];
}

}  // namespace

void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  if (k == 0) return;
  const internal::SelectTemp t = internal::CarveSelectTemp(temp);
  const InvertedHashKey key{StreamKey(seed, step, kStreamRandomK)};
  if (k < n) HashHistogram(key, n, t.hist);
  SelectFromHistogram(t, key, n, k, indices);
}

void RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                     uint64_t n, uint64_t k, uint64_t seed, uint64_t step, ValueFormat format,
                     uint32_t* indices, uint8_t* values, FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  RandomKIndices(temp, temp_bytes, seed, step, n, k, indices);
  // The indices do not depend on the data, so one fused pass walks the
  // elements and the ascending index list together.
  uint64_t nonfinite = 0, j = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
    nonfinite += !IsFinite(a);
    float decoded = 0.0f;
    if (j < k && indices[j] == i) {
      StoreValue(values, j, a, format);
      decoded = RoundToFormat(a, format);
      ++j;
    }
    if (residual != nullptr) residual[i] = ResidualAfter(a, decoded);
  }
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
