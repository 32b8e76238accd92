// CompressedAllreduce: averages one gradient buffer across a group by
// exchanging compressed frames (a sparse allgather), the core of the
// flat exchange and the cross-node stage of the hierarchical one.
//
// One call, on every rank of the group, in this order:
//   1. encode grad (+ its error-feedback residual) into a frame;
//   2. sign it (FrameAuthenticator: job, sender world rank, step, bucket);
//   3. allgather a fixed-size descriptor (frame bytes, n, step, bucket,
//      spec fingerprint) and validate the table: every rank sees the same
//      table, so a disagreement yields the same "collective mismatch"
//      error, naming the ranks, on every rank, before any variable-size
//      receive is posted (Gloo kills the process on an oversized message);
//      each frame length must also fit what the codec can produce for n;
//   4. allgatherv the frames;
//   5. verify every rank's MAC; any failure returns before `out` is
//      touched (a forged, cross-job or replayed frame changes nothing);
//   6. decode-accumulate the frames in rank order into a scratch sum and
//      write sum / divisor to `out`.
// Steps 5-6 fix the arithmetic: the result equals, bit for bit, decoding
// every rank's frame into zeros in rank order and dividing by `divisor`.
//
// Buffers are owned here, grown to the largest call seen and then reused:
// after warm-up the exchange allocates nothing (the codec's own kernel
// scratch is the codec's business). Not thread-safe; one thread drives it
// together with its group.
#ifndef GRADWIRE_LIB_COMPRESSED_ALLREDUCE_H_
#define GRADWIRE_LIB_COMPRESSED_ALLREDUCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec.h"
#include "gradwire/lib/error_feedback.h"
#include "gradwire/lib/exchange_stats.h"
#include "gradwire/lib/frame_auth.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

// A 64-bit fingerprint of a spec (hash of its canonical string): ranks
// compare fingerprints, since the spec string itself has no fixed size.
uint64_t SpecFingerprint(const CompressionSpec& spec);

class CompressedAllreduce {
 public:
  // `codec` and `auth` must outlive this object.
  CompressedAllreduce(const Codec& codec, const FrameAuthenticator& auth);

  CompressedAllreduce(const CompressedAllreduce&) = delete;
  CompressedAllreduce& operator=(const CompressedAllreduce&) = delete;

  // Averages `in` across `group` into `out` (same length; may alias):
  // out = (sum over ranks r of decode(frame_r)) / divisor. `ef` keeps the
  // residual under `key`; `bucket` and `step` bind the frames' MACs and
  // must be the same on every rank. Adds what the call cost to `stats`.
  // Errors: InvalidArgument "collective mismatch ..." (all ranks), the
  // MAC's Unauthenticated / PermissionDenied naming the sender, the
  // transport's Unavailable / DeadlineExceeded / FailedPrecondition. On
  // error `out` is unchanged, but the residual has already absorbed this
  // step's encoding: the caller should treat the buffer's state as lost
  // (the Communicator poisons itself) and restore from a checkpoint.
  absl::Status Run(transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                   uint32_t bucket, uint64_t step, absl::Span<const float> in,
                   absl::Span<float> out, float divisor, ExchangeStats* stats);

  // Only the agreement of step 3 (spec, n, step, bucket; no frames) over
  // `group`. The hierarchical exchange runs it over the whole world first:
  // its node-local stages cannot see a disagreement between nodes, and
  // would otherwise wait for a peer that never comes (a timeout) instead
  // of reporting the mismatch.
  absl::Status Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step, uint64_t n,
                     ExchangeStats* stats);

 private:
  struct Descriptor {
    uint64_t frame_bytes;
    uint64_t n;
    uint64_t step;
    uint64_t bucket;
    uint64_t spec;
  };
  static constexpr size_t kDescriptorBytes = sizeof(Descriptor);

  // Checks the gathered descriptor table; identical verdict on every rank.
  // check_frames: also bound each frame length by what the codec can
  // produce (not in Agree, which exchanges no frame).
  absl::Status CheckTable(const transport::GlooGroup& group, const Descriptor& mine,
                          bool check_frames) const;

  const Codec& codec_;
  const FrameAuthenticator& auth_;
  const uint64_t spec_fingerprint_;

  // Reused across calls (grown, never shrunk).
  std::vector<uint8_t> send_;
  std::vector<uint8_t> recv_;
  std::vector<Descriptor> table_;
  std::vector<uint64_t> sizes_;
  std::vector<absl::Span<const uint8_t>> frames_;
  std::vector<float> sum_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMPRESSED_ALLREDUCE_H_
