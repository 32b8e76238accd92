#include "gradwire/kernels/cpu/randomk.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/radix_select.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Elements per step of the one pass: their hashes are staged on the stack
// (HashHigh32 fills them eight lanes at a time) and tested in a loop that
// vectorizes; the rare passing ones are then collected in index order.
constexpr uint64_t kBlock = 512;

// The selection's candidates: indices and their keys (~RandomKKey:
// selection takes the largest keys, random-k the smallest hashes). The
// keys live in SelectTemp's value list, which random-k does not need.
struct Candidates {
  uint32_t* index;
  uint32_t* key;
  uint64_t count = 0;
};

Candidates CandidatesIn(const internal::SelectTemp& t) {
  Candidates c;
  c.index = t.candidates;
  c.key = reinterpret_cast<uint32_t*>(t.candidate_values);
  return c;
}

// Appends the block's elements whose hash is <= bound, in index order: a
// flag byte each for the whole block first (a loop that vectorizes; read
// back once its stores have left the store buffer), then 64 flags at a
// time folded into a bit mask whose set bits are visited lowest first.
GRADWIRE_CPU_INLINE void CollectBlock(const uint32_t* hash, uint64_t start, uint64_t len,
                                      uint32_t bound, Candidates* c) {
  uint8_t flags[kBlock + 64];
  for (uint64_t i = 0; i < len; ++i) flags[i] = hash[i] <= bound ? 1 : 0;
  memset(flags + len, 0, 64);
  for (uint64_t at = 0; at < len; at += 64) {
    const uint8_t* flag = flags + at;
    uint64_t mask = 0;
    for (int w = 0; w < 8; ++w) {
      // Bytes b0..b7 (0 or 1) to the bits of one byte: the product puts
      // b_e at bit 56 + e, everything else below bit 56 without carries,
      // or above bit 63.
      const uint64_t bytes = LoadLe<uint64_t>(flag + 8 * w);
      mask |= ((bytes * 0x0102040810204080ull) >> 56) << (8 * w);
    }
    for (; mask != 0; mask &= mask - 1) {
      const uint64_t i = at + static_cast<uint64_t>(__builtin_ctzll(mask));
      c->index[c->count] = static_cast<uint32_t>(start + i);
      c->key[c->count] = ~hash[i];
      ++c->count;
    }
  }
}

// Every element a candidate (an unlucky draw, or k close to n).
GRADWIRE_CPU_CLONES void CollectAllCandidates(uint64_t stream_key, uint64_t n, Candidates* c) {
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    HashHigh32(stream_key, start, len, c->key + start);
    for (uint64_t i = 0; i < len; ++i) {
      c->index[start + i] = static_cast<uint32_t>(start + i);
      c->key[start + i] = ~c->key[start + i];
    }
  }
  c->count = n;
}

// The one pass over n: hashes every index and collects the candidates
// (hash <= bound); when `grad` is given, also makes acc = grad + residual,
// stored raw in the residual (or left in grad without one), and returns
// how many acc are not finite.
template <bool kHasGrad, bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t HashPass(uint64_t stream_key, uint64_t n, uint32_t bound,
                                      const float* grad, float* residual, Candidates* c) {
  uint32_t hash[kBlock];
  uint64_t nonfinite = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t len = n - start < kBlock ? n - start : kBlock;
    HashHigh32(stream_key, start, len, hash);
    CollectBlock(hash, start, len, bound, c);
    if (kHasGrad) {
      uint32_t bad = 0;
      for (uint64_t i = start; i < start + len; ++i) {
        const float a = kHasResidual ? grad[i] + residual[i] : grad[i];
        if (kHasResidual) residual[i] = a;
        bad += IsFinite(a) ? 0u : 1u;
      }
      nonfinite += bad;
    }
  }
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t HashPassAs(uint64_t stream_key, uint64_t n, uint32_t bound,
                                        const float* grad, float* residual, Candidates* c) {
  if (grad == nullptr) return HashPass<false, false>(stream_key, n, bound, grad, residual, c);
  if (residual == nullptr) return HashPass<true, false>(stream_key, n, bound, grad, residual, c);
  return HashPass<true, true>(stream_key, n, bound, grad, residual, c);
}

// acc = grad + residual into the residual (raw), without hashing.
GRADWIRE_CPU_CLONES uint64_t AccumulatePass(const float* grad, float* residual, uint64_t n) {
  uint32_t bad = 0;
  uint64_t nonfinite = 0;
  for (uint64_t start = 0; start < n; start += kBlock) {
    const uint64_t end = n - start < kBlock ? n : start + kBlock;
    bad = 0;
    for (uint64_t i = start; i < end; ++i) {
      const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
      if (residual != nullptr) residual[i] = a;
      bad += IsFinite(a) ? 0u : 1u;
    }
    nonfinite += bad;
  }
  return nonfinite;
}

// The residual holds raw acc; make the non-finite ones 0
// (ResidualAfter(acc, 0)).
GRADWIRE_CPU_CLONES void ClearNonFinite(float* residual, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    residual[i] = BitsFloat(SelectBits(IsFinite(residual[i]), FloatBits(residual[i]), 0));
  }
}

// Selects the k indices into `indices` (ascending), 0 < k < n: one pass
// keeps the indices whose hash is below a bound that about 1.25 k + slack
// of them reach (the hash is uniform, so no sample is needed), then the
// exact selection runs on those candidates only. Returns HashPass's count.
uint64_t Select(const internal::SelectTemp& t, uint64_t stream_key, uint64_t n, uint64_t k,
                const float* grad, float* residual, uint32_t* indices) {
  Candidates c = CandidatesIn(t);
  const double want = static_cast<double>(internal::PaddedRank(k, n, n));
  const double bound = want / static_cast<double>(n) * 4294967296.0;  // on the raw hash
  uint64_t nonfinite = 0;
  if (bound >= 4294967295.0) {
    if (grad != nullptr) nonfinite = AccumulatePass(grad, residual, n);
    CollectAllCandidates(stream_key, n, &c);
  } else {
    nonfinite = HashPassAs(stream_key, n, static_cast<uint32_t>(bound), grad, residual, &c);
    if (c.count < k) CollectAllCandidates(stream_key, n, &c);  // an unlucky draw
  }
  const uint32_t* key = c.key;
  const internal::Threshold th =
      internal::SelectAmongCandidates([key](uint64_t j) { return key[j]; }, c.count, k, t.hist);
  // Without branches: which candidates pass is data, not a pattern.
  uint64_t j = 0, taken_equal = 0;
  for (uint64_t m = 0; m < c.count && j < k; ++m) {
    const uint32_t kk = c.key[m];
    const bool equal = kk == th.key;
    const bool take = kk > th.key || (equal && taken_equal < th.take_equal);
    taken_equal += equal ? 1u : 0u;
    indices[j] = c.index[m];
    j += take ? 1u : 0u;
  }
  return nonfinite;
}

// All of the indices, or none: no hashing needed.
uint64_t SelectAllOrNone(uint64_t n, uint64_t k, const float* grad, float* residual,
                         uint32_t* indices) {
  if (k == n) internal::CollectAll(n, indices);
  return grad != nullptr ? AccumulatePass(grad, residual, n) : 0;
}

}  // namespace

void RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step, uint64_t n,
                    uint64_t k, uint32_t* indices) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  if (k == 0 || k == n) {
    SelectAllOrNone(n, k, nullptr, nullptr, indices);
    return;
  }
  Select(internal::CarveSelectTemp(temp, n), StreamKey(seed, step, kStreamRandomK), n, k, nullptr,
         nullptr, indices);
}

void RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                     uint64_t n, uint64_t k, uint64_t seed, uint64_t step, ValueFormat format,
                     uint32_t* indices, uint8_t* values, FusedStats* stats) {
  if (temp == nullptr) {
    *temp_bytes = internal::SelectTempBytes(n);
    return;
  }
  // One pass hashes every index and moves acc into the residual (raw, as
  // top-k does: what an unselected element keeps); the selected elements'
  // values and residuals are then written, and non-finite acc cleared.
  const uint64_t nonfinite = k == 0 || k == n ? SelectAllOrNone(n, k, grad, residual, indices)
                                              : Select(internal::CarveSelectTemp(temp, n),
                                                       StreamKey(seed, step, kStreamRandomK), n, k,
                                                       grad, residual, indices);
  const float* acc = residual != nullptr ? residual : grad;
  // The selected elements are scattered over n: their lines are requested
  // kAhead elements early, so that many misses are in flight at once.
  constexpr uint64_t kAhead = 32;
  for (uint64_t j = 0; j < k; ++j) {
    if (j + kAhead < k) __builtin_prefetch(acc + indices[j + kAhead], 1);
    const float a = acc[indices[j]];
    StoreValue(values, j, a, format);
    if (residual != nullptr) residual[indices[j]] = ResidualAfter(a, RoundToFormat(a, format));
  }
  if (residual != nullptr && nonfinite > 0) ClearNonFinite(residual, n);
  if (stats != nullptr) {
    stats->selected = k;
    stats->nonfinite = nonfinite;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
