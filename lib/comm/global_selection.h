// Exact top-k over candidates spread across the ranks of a group, by
// radix selection on globally summed histograms: the global re-selection
// of the sparse allreduce (sparse_allreduce.h).
//
// Every candidate has a 64-bit selection key, distinct across the whole
// group (the index is part of it):
//   key = MagnitudeKey(value) << 32 | (2^32 - 1 - index)
// so a larger |value| wins, NaN ranks lowest and ±Inf highest (the
// codecs' order, kernels/element_math.h), and equal magnitudes go to the
// lower index, as in every top-k of gradwire. The k largest keys are the
// survivors; since keys are distinct there are exactly min(k, M) of them
// (M: candidates in the group), whatever the ranks hold.
//
// Rounds: each round sums a 128-bin histogram of the next 7 key bits over
// the group (SparseCollectives::AllreduceU32: 512 bytes, halving and
// doubling from 8 ranks on), among the candidates that still tie with the
// k-th key on the bits fixed so far. The first round also yields M; it is
// the last when M <= k. The search ends when the bin holding the k-th key
// is taken whole, or holds at most `band_limit` keys: then every key of
// that bin (the band) travels with the survivors, and every rank, holding
// the same band, picks the same best of it locally (SelectTopKLocally).
// Bins narrow 128-fold a round (the first: 2 octaves, then 1/64 octave,
// then 1/8192), so continuous data takes 2 rounds for up to ~10^4
// candidates near the threshold and 3 for ~10^6, for a band of 256; equal
// magnitudes go into the index bits, 9 rounds at most. Every rank sees the
// same sums, so every rank takes the same decisions.
#ifndef GRADWIRE_LIB_COMM_GLOBAL_SELECTION_H_
#define GRADWIRE_LIB_COMM_GLOBAL_SELECTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

inline uint64_t SelectionKey(float value, uint64_t index) {
  return uint64_t{kernels::MagnitudeKey(value)} << 32 | (0xffffffffu - index);
}

struct GlobalSelection {
  // Keys >= threshold go on (`kept` of them in the group); the survivors
  // are the best `survivors` of those: all of them unless a band is left.
  uint64_t threshold = 0;
  uint64_t kept = 0;
  // Keys >= band_end survive whatever the band holds: only the kept keys
  // below it (the band, at most band_limit) compete for the rest. Equal to
  // threshold when no band is left.
  uint64_t band_end = 0;
  uint64_t candidates = 0;  // M, candidates in the whole group
  uint64_t survivors = 0;   // min(k, M)
  int rounds = 0;           // histogram rounds it took
};

// Collective: every rank passes its candidates' keys (any order; keys
// distinct across the group), the same k and the same band_limit.
// `counts` is scratch reused across calls. Adds each round's transport
// cost to `stats` (may be null).
absl::StatusOr<GlobalSelection> SelectGlobalTopK(transport::GlooGroup& group,
                                                 absl::Span<const uint64_t> keys, uint64_t k,
                                                 uint64_t band_limit, std::vector<uint32_t>* counts,
                                                 ExchangeStats* stats);

// The k largest of one process's keys (all of them), without rounds:
// threshold = the k-th largest key (kept = survivors = min(k, size)). The
// tests' reference, and how every rank settles a band.
GlobalSelection SelectTopKLocally(absl::Span<const uint64_t> keys, uint64_t k);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_GLOBAL_SELECTION_H_
