#include "gradwire/kernels/cpu/topk.h"

#include <string.h>

#include "gradwire/kernels/cpu/radix_select.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

using internal::kTopBins;
using internal::kTopShift;

// Pass 1 of both top-k variants: acc = grad + residual (stored into the
// residual, which thereby already holds e_new = acc for every element that
// will not be selected) and the histogram of magnitude-key bins. Returns the
// number of non-finite acc elements.
uint64_t AccumulateAndHistogram(const float* grad, float* residual, uint64_t n, uint64_t* hist) {
  memset(hist, 0, kTopBins * sizeof(uint64_t));
  // Two interleaved histograms: consecutive elements often land in the same
  // bin, and one counter would serialize on its own store-to-load latency.
  uint64_t h2[kTopBins];
  memset(h2, 0, sizeof h2);
  uint64_t nonfinite = 0;
  uint64_t i = 0;
  if (residual != nullptr) {
    for (; i + 1 < n; i += 2) {
      const float a0 = grad[i] + residual[i];
      const float a1 = grad[i + 1] + residual[i + 1];
      residual[i] = a0;
      residual[i + 1] = a1;
      nonfinite += !IsFinite(a0);
      nonfinite += !IsFinite(a1);
      ++hist[MagnitudeKey(a0) >> kTopShift];
      ++h2[MagnitudeKey(a1) >> kTopShift];
    }
    for (; i < n; ++i) {
      const float a = grad[i] + residual[i];
      residual[i] = a;
      nonfinite += !IsFinite(a);
      ++hist[MagnitudeKey(a) >> kTopShift];
    }
  } else {
    for (; i + 1 < n; i += 2) {
      nonfinite += !IsFinite(grad[i]);
      nonfinite += !IsFinite(grad[i + 1]);
      ++hist[MagnitudeKey(grad[i]) >> kTopShift];
      ++h2[MagnitudeKey(grad[i + 1]) >> kTopShift];
    }
    for (; i < n; ++i) {
      nonfinite += !IsFinite(grad[i]);
      ++hist[MagnitudeKey(grad[i]) >> kTopShift];
    }
  }
  for (uint32_t b = 0; b < kTopBins; ++b) hist[b] += h2[b];
  return nonfinite;
}

// Emits element `idx` as output j: its value rounded to the format, and its
// residual acc - decoded.
inline void Emit(const float* acc, float* residual, uint32_t idx, uint64_t j, ValueFormat format,
                 uint32_t* indices, uint8_t* values) {
  const float a = acc[idx];
  indices[j] = idx;
  StoreValue(values, j, a, format);
  if (residual != nullptr) residual[idx] = ResidualAfter(a, RoundToFormat(a, format));
}

// The residual holds raw acc for unselected elements; make the non-finite
// ones 0 (ResidualAfter(acc, 0)). Selected ones are already finite.
void ClearNonFiniteResidual(float* residual, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    if (!IsFinite(residual[i])) residual[i] = 0.0f;
  }
}

void Finish(float* residual, uint64_t n, uint64_t k, uint64_t nonfinite, FusedStats* stats) {
  if (residual != nullptr && nonfinite > 0) ClearNonFiniteResidual(residual, n);
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace

void TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                  uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                  uint8_t* values, FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  const internal::SelectTemp t = internal::CarveSelectTemp(temp);
  const uint64_t nonfinite = AccumulateAndHistogram(grad, residual, n, t.hist);
  const float* acc = residual != nullptr ? residual : grad;
  if (k > 0) {
    const auto key = [acc](uint64_t i) { return MagnitudeKey(acc[i]); };
    const internal::BinPick pick = internal::PickBin(t.hist, kTopBins, k);
    const uint64_t m = internal::CollectCandidates(key, n, pick.bin, t.candidates);
    const internal::Threshold th =
        internal::RefineThreshold(key, t.candidates, m, pick.bin, k - pick.above);
    uint64_t j = 0, taken_equal = 0;
    for (uint64_t c = 0; c < m; ++c) {
      const uint32_t idx = t.candidates[c];
      const uint32_t kk = key(idx);
      if (kk > th.key || (kk == th.key && taken_equal++ < th.take_equal)) {
        Emit(acc, residual, idx, j++, format, indices, values);
      }
    }
  }
  Finish(residual, n, k, nonfinite, stats);
}

void ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                        uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                        uint8_t* values, FusedStats* stats, ApproxTopKBand* band) {
  if (temp == nullptr) {
    *temp_bytes = kTopBins * sizeof(uint64_t);
    return;
  }
  uint64_t* hist = static_cast<uint64_t*>(temp);
  const uint64_t nonfinite = AccumulateAndHistogram(grad, residual, n, hist);
  const float* acc = residual != nullptr ? residual : grad;
  ApproxTopKBand b;
  if (k > 0) {
    const internal::BinPick pick = internal::PickBin(hist, kTopBins, k);
    const uint64_t fill = k - pick.above;
    b.lower_key = pick.bin << kTopShift;
    b.upper_key = (pick.bin + 1) << kTopShift;
    b.above = pick.above;
    b.in_band = hist[pick.bin];
    uint64_t j = 0, filled = 0;
    for (uint64_t i = 0; i < n && j < k; ++i) {
      const uint32_t bin = MagnitudeKey(acc[i]) >> kTopShift;
      if (bin > pick.bin || (bin == pick.bin && filled++ < fill)) {
        Emit(acc, residual, static_cast<uint32_t>(i), j++, format, indices, values);
      }
    }
  }
  if (band != nullptr) *band = b;
  Finish(residual, n, k, nonfinite, stats);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
