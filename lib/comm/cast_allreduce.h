// CastAllreduce: averages one gradient buffer cast to fp16 or bf16 by a
// reduce-scatter of the 16-bit values and an allgather of the averages,
// rounded to 16 bits by their owner, whose rounding goes back into its
// error feedback. Per rank it moves (P-1)/P (2n + 2n) bytes each way: half
// the fp32 ring's 2 (P-1)/P 4n (as much as PyTorch's fp16 compress hook,
// which rounds at every hop and returns nothing), where the casts'
// allgather moves (P-1) 2n. Design, bytes and rounds: docs/cast_allreduce.md.
//
// The index range [0, n) is cut into P even regions, b_j = floor(j n / P)
// (lengths differ by at most one; empty when n < P), region j owned by
// rank j. One call, on every rank of the group:
//   1. encode `in` (+ its error-feedback residual) with the cast codec, as
//      the allgather does: one 16-bit value per element;
//   2. agree on spec, n, step and bucket (exchange_agreement.h); a
//      disagreement is InvalidArgument "collective mismatch" on every
//      rank, naming the ranks, before any variable-size receive is posted;
//   3. reduce-scatter: region j's values go to rank j as a sealed region
//      frame (region_frame.h, kImplied layout: one value per element of
//      the region), one round of concurrent messages (this rank's own
//      region stays here, unframed);
//   4. the owner verifies every frame and averages its region in fp32:
//      avg = (zeros + each rank's values, in rank order) / divisor;
//   5. verdict: a sum-allreduce of one status word per owner, so a
//      contribution only its owner could see rejected fails every rank,
//      naming the owner;
//   6. the owner rounds avg to the cast's format, v = cast(avg) (the
//      codec's rounding: nearest even, saturating); the sealed ring
//      allgather (GlooGroup::SealedAllgather, chunk MACs) of every
//      region's v, two values per fp32 slot; every rank decodes them:
//      out = decode(v); the owner adds what its rounding lost to its
//      residual for the key, times the divisor (the sum's share of it):
//      e[i] = ResidualAfter(e[i], -fl(divisor * (avg[i] - decode(v[i])))),
//      so the next step returns it (server-side error feedback, as in
//      DoubleSqueeze, Tang et al. ICML'19). Without error feedback the
//      rounding is dropped.
//
// What it computes, bit for bit: out = decode(cast(A)), A the cast codec's
// DecodeAverage of every rank's frame (the sparse allgather's result: both
// sum each element in rank order from zero and divide, CastDecodeAverage's
// contract); the residual is what the codec's error feedback leaves, plus
// on the owner's region the term above. So it differs from the allgather
// by one rounding of the average to 16 bits, which the owner's residual
// carries to the next step.
//
// Security and failures as in SparseAllreduce, with the dense exchange's
// session MAC (AES-GMAC, chunk_mac.h; about twice HMAC-SHA256's speed on
// the CPUs measured): each contribution carries a chunk trailer over its
// region frame, bound by a SealedChunkContext (phase kDirectMessage,
// sealer = the sender's world rank, chunk = the region, offset and length,
// scope {step, bucket, contribution_stage}), and is validated before any
// value is used; the averages carry the sealed allgather's chunk MACs,
// bound to their owner, step, bucket and `allgather_stage`. On error the residual has absorbed this
// step's encoding (not the owner's rounding) and `out` is unchanged (it is
// written only once the allgather has succeeded); after a transport error
// the caller treats the group as lost (the Communicator poisons itself).
//
// Buffers are grown to the largest call seen and reused. Not thread-safe.
#ifndef GRADWIRE_LIB_COMM_CAST_ALLREDUCE_H_
#define GRADWIRE_LIB_COMM_CAST_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/comm/sparse_allgather.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

struct CastAllreduceOptions {
  // ChunkScope::stage of the contributions and of the averages' allgather:
  // keeps their MACs apart from the caller's other sealed messages of the
  // same bucket and step.
  uint32_t contribution_stage = 4;
  uint32_t allgather_stage = 5;
  // Tests only: after signing, flip one bit of this rank's contribution to
  // the rank of this number (-1: none), as a forger on the wire would.
  int corrupt_contribution_to_for_test = -1;
};

class CastAllreduce {
 public:
  // Spec methods it serves: fp16 and bf16.
  static bool Supports(const CompressionSpec& spec);

  // `codec` must be one Supports accepts; it, `auth` (which only names the
  // ranks of a collective mismatch) and `chunk_auth` must outlive this.
  CastAllreduce(const Codec& codec, const FrameSigner& auth,
                const transport::ChunkAuthenticator& chunk_auth,
                const CastAllreduceOptions& options = CastAllreduceOptions());

  CastAllreduce(const CastAllreduce&) = delete;
  CastAllreduce& operator=(const CastAllreduce&) = delete;

  // The exchange above: `out` (same length as `in`; may alias it) gets the
  // average, `ef` keeps the residual under `key`; `bucket` and `step` bind
  // the MACs and must be the same on every rank. Adds the cost to `stats`.
  // Errors: InvalidArgument "collective mismatch ..." (every rank),
  // Unauthenticated / PermissionDenied / InvalidArgument for a rejected
  // contribution (naming the sender, or the owner that rejected it),
  // Unauthenticated for a rejected chunk of the averages, the transport's
  // Unavailable / DeadlineExceeded / FailedPrecondition. n must be below
  // 2^32. Run is exactly Prepare and Complete in a row.
  absl::Status Run(transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                   uint32_t bucket, uint64_t step, absl::Span<const float> in,
                   absl::Span<float> out, float divisor, ExchangeStats* stats);

  // One bucket between the two stages (owned by the caller: one per bucket
  // in flight), so bucket i+1 can be prepared while bucket i is on the
  // wire (GradientExchanger, through the Communicator's staged calls).
  class Staged {
   public:
    Staged() = default;
    Staged(const Staged&) = delete;
    Staged& operator=(const Staged&) = delete;

   private:
    friend class CastAllreduce;
    uint32_t bucket = 0;
    uint64_t step = 0;
    uint64_t n = 0;
    absl::Span<float> out;
    absl::Span<float> residual;       // the key's (empty: no error feedback)
    std::vector<uint64_t> bounds;     // P + 1
    std::vector<uint64_t> counts;     // P region lengths
    std::vector<uint8_t> frame;       // this rank's codec frame
    const uint8_t* values = nullptr;  // its values section
    std::vector<uint8_t> send;        // outgoing region frames, sealed
    std::vector<absl::Span<const uint8_t>> blocks;
    std::vector<uint64_t> caps;
  };
  // Step 1 and the sealing of step 3: CPU only, no collective (reads only
  // the group's size and ranks). `out` must stay valid, and untouched by
  // the caller, until Complete returns.
  absl::Status Prepare(const transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                       uint32_t bucket, uint64_t step, absl::Span<const float> in,
                       absl::Span<float> out, Staged& st, ExchangeStats* stats);
  // Steps 2-6 for a prepared bucket: the collectives, the owner's average
  // and the allgather into its `out`.
  absl::Status Complete(transport::GlooGroup& group, Staged& st, float divisor,
                        ExchangeStats* stats);
  // Threads: Prepare and Complete may run on two threads for different
  // Staged (Prepare uses the ErrorFeedback and its Staged, Complete the
  // group, its Staged and the members below); calls of one stage must not
  // overlap, and a Staged is handed on with a happens-before edge.

 private:
  absl::Status Agree(transport::GlooGroup& group, const Staged& st, ExchangeStats* cost);
  // The context the contribution of world rank `sealer` to region j is
  // sealed under.
  void Context(int group_size, const Staged& st, int sealer, int j, uint8_t* out) const;
  // The owner's half: its region's average into avg_. The status is what
  // the owner found wrong, not a transport error.
  absl::Status Reduce(const transport::GlooGroup& group, const Staged& st, float divisor,
                      ExchangeStats* cost);
  absl::Status Verdict(transport::GlooGroup& group, const Staged& st, const absl::Status& mine,
                       ExchangeStats* cost);
  // Step 6's ends: my region's average rounded into packed_ (its rounding
  // error into rounding_); then every region decoded into `out` and the
  // rounding error, times the divisor, added to my residual.
  absl::Status RoundAverages(const transport::GlooGroup& group, const Staged& st);
  absl::Status DecodeAverages(const transport::GlooGroup& group, const Staged& st, float divisor);

  const Codec& codec_;
  const transport::ChunkAuthenticator& chunk_auth_;
  const CastAllreduceOptions options_;
  SparseAllgather naming_;  // names the ranks of a collective mismatch
  const uint64_t spec_fingerprint_;

  // Complete's scratch (grown, never shrunk), and Run's Staged.
  Staged run_;
  std::vector<uint64_t> agreed_;
  std::vector<uint8_t> scratch_;  // the transport's
  std::vector<absl::Span<const uint8_t>> received_;
  std::vector<const uint8_t*> values_;  // each sender's values for my region
  std::vector<uint32_t> no_indices_;
  std::vector<float> avg_;       // my region's average
  std::vector<float> rounding_;  // avg_ - its rounding to 16 bits
  // The averages' allgather: region j's 16-bit values from slot
  // slot_begin_[j], two a slot (an odd region's last slot half zero).
  std::vector<float> packed_;
  std::vector<uint64_t> slot_counts_;
  std::vector<uint64_t> slot_begin_;
  std::vector<uint32_t> verdicts_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_CAST_ALLREDUCE_H_
