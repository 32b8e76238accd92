#include "gradwire/kernels/cpu/randomk.h"

#include <string.h>

#include "gradwire/kernels/cpu/radix_select.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Selection takes the largest keys; random-k wants the smallest hashes.
struct InvertedHashKey {
  uint64_t stream_key;
  uint32_t operator()(uint64_t i) const { return ~RandomKKey(stream_key, i); }
};

// Selects the k indices into `indices` (ascending): one hash pass keeps
// the indices whose hash is below a bound that about 1.25 k + slack of
// them reach (the hash is uniform, so no sample is needed), then the exact
// selection runs on those candidates only.
void Select(const internal::SelectTemp& t, const InvertedHashKey& key, uint64_t n, uint64_t k,
            uint32_t* indices) {
  if (k == n) {
    // Everything: no need to look at keys.
    for (uint64_t i = 0; i < n; ++i) indices[i] = static_cast<uint32_t>(i);
    return;
  }
  const double want = static_cast<double>(internal::PaddedRank(k, n, n));
  const double bound = want / static_cast<double>(n) * 4294967296.0;  // on the raw hash
  uint64_t m;
  if (bound >= 4294967295.0) {
    m = internal::CollectAll(n, t.candidates);
  } else {
    // hash <= bound  <=>  ~hash >= ~bound
    const uint32_t lower = ~static_cast<uint32_t>(bound);
    m = 0;
    for (uint64_t i = 0; i < n; ++i) {
      t.candidates[m] = static_cast<uint32_t>(i);
      m += key(i) >= lower;
    }
    if (m < k) m = internal::CollectAll(n, t.candidates);  // an unlucky draw
  }
  const uint32_t* cand = t.candidates;
  const internal::Threshold th = internal::SelectAmongCandidates(
      [&](uint64_t j) { return key(cand[j]); }, m, k, t.hist);
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t c = 0; c < m; ++c) {
    const uint32_t idx = t.candidates[c];
    const uint32_t kk = key(idx);
    if (kk > th.key || (kk == th.key && taken_equal++ < th.take_equal)) indices[j++] = idx;
  }
}

}  // namespace

void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  if (k == 0) return;
  const internal::SelectTemp t = internal::CarveSelectTemp(temp, n);
  const InvertedHashKey key{StreamKey(seed, step, kStreamRandomK)};
  Select(t, key, n, k, indices);
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
