// SparseAllreduce: averages one gradient buffer across a group with a
// sparse allreduce whose bytes per rank do not grow with the group (after
// Ok-Topk, Li and Hoefler, PPoPP'22): the second sparse exchange beside
// the sparse allgather (sparse_allgather.h), for groups past its
// break-even. Design, byte and round counts: docs/sparse_allreduce.md.
//
// The index range [0, n) is cut into P regions, region j owned by rank j.
// One call, on every rank of the group:
//   1. encode `in` (+ its error-feedback residual) with the codec, as the
//      allgather does: k = spec.SelectedCount(n) entries (index, value);
//   2. agree on spec, n, step, bucket and the region plan: one direct
//      allgather round where the group gathers small blocks directly (P <=
//      16 by default), else a recursive-doubling min/max-allreduce (log2 P
//      steps). A disagreement on the first four is "collective mismatch" on
//      every rank, naming the ranks, before any variable-size receive is
//      posted; on the plan, everyone falls back to even regions;
//   3. sparse reduce-scatter: split the entries by region, send each
//      region's share to its owner as a signed region frame
//      (region_frame.h), one round of concurrent messages; the owner
//      verifies every frame and sums the values in rank order;
//   4. global re-selection: the owners' nonzero sums are the candidates;
//      the k largest by |sum| (ties to the lower index) over the whole
//      group survive (global_selection.h; random-k skips it: its
//      candidates share the k seeded indices, so all survive);
//   5. allgather of every region's survivors (fp32 sums), signed, in
//      ceil(log2 P) steps; every rank verifies every frame;
//   6. out = the survivors' sums / divisor, 0 elsewhere; every entry this
//      rank sent that did not survive goes back into its residual
//      (ErrorFeedback::GiveBack).
//
// What it computes, bit for bit (the tests' CPU reference):
//   s[i] = ((0 + v_0[i]) + v_1[i]) + ... + v_{P-1}[i]   (rank order;
//          v_r[i] = rank r's decoded entry at i, absent entries add nothing)
//   S    = the min(k, |C|) elements of C = {i : s[i] != 0} with the
//          largest (MagnitudeKey(s[i]), -i)
//   out[i] = s[i] / divisor for i in S, else 0
//   residual_r[i] = fl(e'_r[i] + v_r[i]) (0 if not finite) for every entry
//          of rank r with i not in S, where e'_r is what Encode left;
//   except that out is NaN everywhere if any rank's g + e_old held a NaN
//          or an infinity (the agreement carries a flag; codec.h's
//          non-finite policy), the residuals as above.
// So per rank g + e_old == (its entries in S) + e_new, exactly whenever
// the codec's own contract is exact (selection codecs). Zeros carry no
// meaning (a zero sum is no candidate), which lets a region frame switch
// to a dense layout when that is smaller (SparCML's rule, per message).
//
// Security and failures as in SparseAllgather: frames are authenticated
// (a FrameSigner: sender world rank, step, bucket; the region frame's
// header binds kind and region) and validated before any value is used.
// An owner that rejects a contribution sends a failure notice instead of
// survivors, so every rank fails the call naming it. On error `out` is
// unchanged, but the residual has absorbed this step's encoding: the
// caller treats the buffer's state as lost (the Communicator poisons
// itself).
//
// Regions: by default each exchange of a bucket cuts the next one's
// regions at quantiles of its survivors (every rank holds the same
// survivors, so the plan needs no message), balancing the owners' load
// when the large gradients cluster. The result does not depend on the
// plan; only the load does.
//
// Buffers are grown to the largest call seen and reused. Not thread-safe.
#ifndef GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_H_
#define GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/comm/region_frame.h"
#include "gradwire/lib/comm/sparse_allgather.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

struct SparseAllreduceOptions {
  // Re-cut each bucket's regions at its last survivors' quantiles (false:
  // always even regions, n / P elements each).
  bool balance_regions = true;
  // Tests only: after signing, flip one bit of this rank's contribution to
  // the rank of this number (-1: none), as a forger on the wire would.
  int corrupt_contribution_to_for_test = -1;
  // Tests only: ... in this many Runs, the first ones (the sparse allreduce).
  int64_t corrupt_runs_for_test = INT64_MAX;
};

// What the last Run did (for tests and benchmarks).
struct SparseAllreduceInfo {
  std::vector<uint64_t> bounds;    // the region plan used: P + 1 boundaries
  uint64_t candidates = 0;         // M: nonzero sums over all regions
  uint64_t survivors = 0;          // |S|
  int selection_rounds = 0;        // histogram rounds (0: random-k, or n = 0)
  uint64_t dense_frames_sent = 0;  // frames that took the dense layout
};

class SparseAllreduce {
 public:
  // Spec methods it serves: the sparse codecs (topk, approx_topk, randomk).
  static bool Supports(const CompressionSpec& spec);

  // `codec` must be one Supports accepts; it and `auth` must outlive this.
  SparseAllreduce(const Codec& codec, const FrameSigner& auth,
                  const SparseAllreduceOptions& options = SparseAllreduceOptions());

  SparseAllreduce(const SparseAllreduce&) = delete;
  SparseAllreduce& operator=(const SparseAllreduce&) = delete;

  // The exchange above: `out` (same length as `in`; may alias it) gets the
  // average, `ef` keeps the residual under `key`; `bucket` and `step` bind
  // the MACs and must be the same on every rank. Adds the cost to `stats`.
  // Errors: InvalidArgument "collective mismatch ..." (every rank),
  // Unauthenticated / PermissionDenied / InvalidArgument for a rejected
  // frame (naming the sender or the owner that rejected it), the
  // transport's Unavailable / DeadlineExceeded / FailedPrecondition.
  // n must be below 2^32.
  // Run is exactly Prepare and Complete in a row.
  absl::Status Run(transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                   uint32_t bucket, uint64_t step, absl::Span<const float> in,
                   absl::Span<float> out, float divisor, ExchangeStats* stats);

  // One bucket between the two stages (owned by the caller: one per bucket
  // in flight), so that bucket i+1 can be encoded while bucket i is on the
  // wire (GradientExchanger, through the Communicator's staged calls).
  struct Staged {
    uint32_t bucket = 0;
    uint64_t step = 0;
    uint64_t n = 0, k = 0;
    absl::Span<float> out;
    absl::Span<float> residual;        // the key's (empty: no error feedback)
    std::vector<uint8_t> frame;        // this rank's codec frame
    absl::Span<const uint8_t> values;  // its values section
    std::vector<uint32_t> indices;     // its entries' indices, ascending
    std::vector<uint8_t> random_temp;  // random-k's index generation
    bool nonfinite = false;            // this rank's input was
  };
  // Step 1: error feedback, encode, this rank's entries read back; CPU
  // only, no collective. `out` must stay valid, and untouched by the
  // caller, until Complete returns; so must the key's residual (Complete
  // gives back to it what the global selection drops). FailedPrecondition
  // if error feedback is on and the residual is not in host memory.
  absl::Status Prepare(ErrorFeedback& ef, absl::string_view key, uint32_t bucket, uint64_t step,
                       absl::Span<const float> in, absl::Span<float> out, Staged& st,
                       ExchangeStats* stats);
  // Steps 2-6 for a prepared bucket: the collectives, the average into its
  // `out` and the give-back into its residual.
  absl::Status Complete(transport::GlooGroup& group, Staged& st, float divisor,
                        ExchangeStats* stats);
  // Threads: Prepare and Complete may run on two threads for different
  // Staged (Prepare uses the ErrorFeedback and its Staged, Complete the
  // group, its Staged and the members below); calls of one stage must not
  // overlap, and a Staged is handed on with a happens-before edge.

  // Sets the region plan of `bucket`'s next exchange: P + 1 boundaries,
  // 0 = b_0 <= b_1 <= ... <= b_P = n (regions may be empty). Every rank
  // must set the same plan, or that exchange falls back to even regions.
  // InvalidArgument if the boundaries are not such a sequence.
  absl::Status SetRegions(uint32_t bucket, std::vector<uint64_t> bounds);

  const SparseAllreduceInfo& last_run() const { return last_; }

 private:
  // Steps of Run (sparse_allreduce.cc; steps 4-5 in sparse_allreduce_survivors.cc).
  // `nonfinite`: this rank's input was; sets nonfinite_ to whether any
  // rank's was.
  absl::Status Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step, uint64_t n,
                     bool nonfinite, ExchangeStats* cost);
  absl::Status ScatterContributions(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                    ExchangeStats* cost);
  // The owner's half of step 3 and its survivors; the status is what the
  // owner found wrong (sent on as a failure notice), not a transport error.
  // Its cost is the entries', not the region's: the contributions are
  // added into sum_, which is kept zero between calls, each entry's bit is
  // set in touched_, and the candidates (with their sums, which the
  // survivors' frame takes from there) are read off the set bits, 64
  // elements a word, each sum zeroed as it is read. A region of n / P
  // elements was zeroed and scanned element by element before, and the
  // survivors' sums gathered from it: ~20 % of a rank's CPU on four ranks
  // at top-k 1 %.
  absl::Status ReduceRegion(const transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                            ExchangeStats* cost);
  absl::Status Select(transport::GlooGroup& group, ExchangeStats* cost);
  absl::Status GatherSurvivors(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                               const absl::Status& owner_status, ExchangeStats* cost);
  // The kept_ gathered survivors hold a band: keys from band_end_ on
  // survive, the band's keys (at most BandLimit()) compete for the rest.
  absl::Status SettleBand(uint32_t bucket, uint64_t step, ExchangeStats* cost);
  void PlanNext(uint32_t bucket, uint64_t n, int p);

  // Expectation for region j's frames of `kind`.
  RegionExpectation Expect(RegionFrameKind kind, int j) const;
  // Most keys of a band left to the survivors' receivers (256).
  uint64_t BandLimit() const;
  uint64_t Capacity(RegionFrameKind kind, int j) const;

  const Codec& codec_;
  const FrameSigner& auth_;
  const SparseAllreduceOptions options_;
  SparseAllgather naming_;  // names the ranks of a collective mismatch
  const uint64_t spec_fingerprint_;
  const bool random_k_;
  const RegionLayout sparse_layout_;
  const ValueType value_type_;

  std::map<uint32_t, std::vector<uint64_t>> plans_;  // bucket -> next bounds
  int64_t runs_ = 0;                                 // Run calls so far
  SparseAllreduceInfo last_;

  // The call in progress (grown, never shrunk).
  Staged staged_;  // Run's
  uint64_t n_ = 0, k_ = 0;
  bool nonfinite_ = false;               // some rank's input was non-finite
  std::vector<uint64_t> bounds_;         // P + 1
  std::vector<uint64_t> agreed_;         // the agreement's table
  std::vector<uint64_t> first_entry_;    // P + 1: my first entry in each region
  absl::Span<const uint8_t> my_values_;  // this rank's values (Complete: the Staged's)
  std::vector<uint32_t> my_indices_;     // their indices (Complete: the Staged's, swapped in)
  std::vector<uint32_t> relative_;       // the same, relative to their region
  std::vector<uint8_t> send_;            // outgoing frames
  std::vector<absl::Span<const uint8_t>> blocks_;
  std::vector<uint64_t> caps_;
  std::vector<uint8_t> scratch_;  // the transport's
  std::vector<absl::Span<const uint8_t>> received_;
  std::vector<uint32_t> frame_indices_;  // a parsed frame's
  // My region's sums: all +0 between calls (only the touched entries are
  // summed into, and each is zeroed again as it is read out), unless a
  // call failed half way (sums_dirty_: the next one zeroes them whole).
  std::vector<float> sum_;
  std::vector<uint64_t> touched_;  // a bit per sum: an entry added to it (0 between calls)
  bool sums_dirty_ = true;
  std::vector<uint32_t> candidates_;   // relative indices of nonzero sums
  std::vector<float> candidate_sums_;  // their sums
  std::vector<uint64_t> keys_;         // their selection keys
  std::vector<uint32_t> counts_;       // selection histograms
  uint64_t threshold_ = 0;             // keys >= it go on (kept_ of them)
  uint64_t band_end_ = 0;              // keys >= it survive; below, the band competes
  std::vector<uint64_t> band_keys_;    // the band's keys, when one is left
  std::vector<uint64_t> survived_;     // a bit per element; all 0 between calls
  uint64_t kept_ = 0;
  std::vector<uint32_t> my_survivors_;      // relative indices in my region
  std::vector<uint8_t> value_bytes_;        // their fp32 sums, little endian
  std::vector<uint32_t> survivor_indices_;  // global, ascending
  std::vector<float> survivor_values_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_H_
