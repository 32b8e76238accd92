// SparseAllgather: averages one gradient buffer across a group by
// exchanging compressed frames (a sparse allgather), the core of the
// flat exchange and the cross-node stage of the hierarchical one.
//
// One call, on every rank of the group, in this order:
//   1. encode grad (+ its error-feedback residual) into a frame;
//   2. sign it (a FrameSigner: job, sender world rank, step, bucket; the
//      Communicator gives its session's GMAC, session_frame_auth.h);
//   3. allgather a fixed-size descriptor (frame bytes, n, step, bucket,
//      spec fingerprint) and validate the table: every rank sees the same
//      table, so a disagreement yields the same "collective mismatch"
//      error, naming the ranks, on every rank, before any variable-size
//      receive is posted (Gloo kills the process on an oversized message);
//      each frame length must also fit what the codec can produce for n;
//   4. allgatherv the frames.
// Steps 3 and 4 take two rounds of messages on a bucket's first exchange
// only. Once every rank has agreed on a bucket's shape (n, dense section
// length; the spec is the object's), every rank knows the largest block a
// peer can send for it, and later exchanges of that bucket send each
// rank's descriptor and frame as one self-delimiting block under that
// capacity (GlooGroup::AllgathervBounded): one round. The table is then
// checked after the blocks are in, identically on every rank as before
// (each rank receives the same blocks), with the same errors; a rank whose
// bucket changed shape sends its descriptor alone, so no block can
// outgrow a peer's receive. (Under load, with four ranks on two cores, a
// round costs milliseconds: one fewer took the README's approximate
// top-k step from 87 to 76 ms and a 44-bucket Transformer step from 212
// to 162 ms, docs/results/2026-12-07-one-round.md.)
// Then:
//   5. verify every rank's MAC; any failure returns before `out` is
//      touched (a forged, cross-job or replayed frame changes nothing);
//   6. Codec::DecodeAverage: validate every frame, then decode-accumulate
//      them in rank order into `out` (zeroed) and divide by `divisor`.
// Steps 5-6 fix the arithmetic: the result equals, bit for bit, decoding
// every rank's frame into zeros in rank order and dividing by `divisor`.
//
// The same call in three stages, for callers that pipeline buckets
// (GradientExchanger, through Communicator's staged calls):
//   Encode    steps 1-2, CPU only (no collective);
//   Transfer  steps 3-4, the collectives only;
//   Finish    steps 5-6, CPU only.
// Run is exactly Encode, Transfer, Finish in a row, so a staged exchange
// sends the same frames and computes the same floats as Run. One bucket's
// frames live in an InFlight (owned by the caller: one per bucket in
// flight), so bucket i+1 can be encoded while bucket i is on the wire.
//
// Dense section (optional): a caller whose buffer mixes tensors to
// compress with small ones it keeps exact (biases, norms: a DDP bucket)
// passes the exact ones as `dense_in`. They travel in the same frames, as
// a second, fp32 ("none" codec) frame after the codec's, under the one
// MAC, and are averaged into `dense_out` in rank order: one exchange (two
// message rounds) instead of this one plus a dense allreduce (an
// agreement and 2(P-1) ring steps more). The price: each rank receives
// every rank's dense section, (P-1) x 4 bytes per element against the
// ring's 2(P-1)/P x 4, so it pays only for small dense parts. No error
// feedback for that section: fp32 is exact, its residual would be 0.
// The descriptor carries its length (ranks must agree); every frame is
// validated, both sections, before either output is touched.
//
// Buffers are grown to the largest call seen and then reused: after
// warm-up the exchange allocates nothing (encode scratch lives in the
// ErrorFeedback, decode scratch here). Threads: Encode and Finish may run
// on one thread while Transfer runs on another, for different InFlights
// (they share no member of this object: Encode uses the ErrorFeedback and
// its InFlight, Transfer the group and its InFlight, Finish the decode
// scratch here). Calls of one stage must not overlap, and an
// InFlight must be handed from stage to stage with a happens-before edge
// (a mutex). Agree belongs with Transfer's thread.
//
// Device buffers (lib/codec/device_call.h): with
// a DeviceCall, `in` and `out` are device memory: Encode runs on the
// device and only the frame comes to the host, Finish decode-averages the
// P frames on the device. The frames, descriptors and MACs are host bytes
// as always; there is no dense section on the device.
#ifndef GRADWIRE_LIB_COMM_SPARSE_ALLGATHER_H_
#define GRADWIRE_LIB_COMM_SPARSE_ALLGATHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/transport/bounded_block.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

// A 64-bit fingerprint of a spec (hash of its canonical string): ranks
// compare fingerprints, since the spec string itself has no fixed size.
uint64_t SpecFingerprint(const CompressionSpec& spec);

class SparseAllgather {
 private:
  struct Descriptor {
    uint64_t frame_bytes;
    uint64_t n;
    uint64_t step;
    uint64_t bucket;
    uint64_t spec;
    uint64_t dense_n;  // elements of the dense section (0: none)
  };

 public:
  // Bytes in front of a frame in an exchange block after a bucket's first
  // exchange: the transport's length header, then this rank's descriptor
  // (the frame follows when it fits). The cost model counts them.
  static constexpr size_t kBlockPrefixBytes = transport::kBoundedHeaderBytes + sizeof(Descriptor);

  // One bucket's exchange between the stages: this rank's signed frame,
  // the descriptor table and the frames received. Reusable.
  class InFlight {
   public:
    InFlight() = default;
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    friend class SparseAllgather;
    uint32_t bucket_ = 0;
    uint64_t step_ = 0;
    uint64_t n_ = 0;
    uint64_t dense_n_ = 0;
    size_t frame_bytes_ = 0;  // this rank's signed frame
    // [block prefix: kBlockPrefixBytes][signed frame: frame_bytes_]
    std::vector<uint8_t> send_;
    std::vector<uint8_t> recv_;
    std::vector<Descriptor> table_;
    std::vector<uint64_t> sizes_;    // rank r's frame: sizes_[r] bytes
    std::vector<uint64_t> offsets_;  // at recv_[offsets_[r]]
  };

  // `codec` and `auth` must outlive this object. `auth` is the MAC every
  // rank of the group signs with (a session's, or the job-long HMAC).
  SparseAllgather(const Codec& codec, const FrameSigner& auth);

  SparseAllgather(const SparseAllgather&) = delete;
  SparseAllgather& operator=(const SparseAllgather&) = delete;

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
                   absl::Span<float> out, float divisor, ExchangeStats* stats) {
    return Run(group, ef, key, bucket, step, in, out, {}, {}, divisor, stats);
  }
  // With a dense section (see the top of this file): dense_out = the
  // rank-order sum of every rank's dense_in / divisor (same lengths; may
  // alias). On error neither `out` nor `dense_out` is changed.
  absl::Status Run(transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                   uint32_t bucket, uint64_t step, absl::Span<const float> in,
                   absl::Span<float> out, absl::Span<const float> dense_in,
                   absl::Span<float> dense_out, float divisor, ExchangeStats* stats,
                   const DeviceCall* device = nullptr);

  // Run's stages (see the top of this file); the same arguments and
  // errors. `group` in Encode and Finish is only read for rank numbers
  // (immutable), so they may run while Transfer uses the group. Each
  // stage adds what it cost to `stats`; Finish counts the bucket.
  // The dense-section forms take it in Encode and give it back in Finish.
  absl::Status Encode(const transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                      uint32_t bucket, uint64_t step, absl::Span<const float> in, InFlight& f,
                      ExchangeStats* stats) {
    return Encode(group, ef, key, bucket, step, in, {}, f, stats);
  }
  absl::Status Encode(const transport::GlooGroup& group, ErrorFeedback& ef, absl::string_view key,
                      uint32_t bucket, uint64_t step, absl::Span<const float> in,
                      absl::Span<const float> dense_in, InFlight& f, ExchangeStats* stats,
                      const DeviceCall* device = nullptr);
  absl::Status Transfer(transport::GlooGroup& group, InFlight& f, ExchangeStats* stats);
  absl::Status Finish(const transport::GlooGroup& group, InFlight& f, absl::Span<float> out,
                      float divisor, ExchangeStats* stats) {
    return Finish(group, f, out, {}, divisor, stats);
  }
  absl::Status Finish(const transport::GlooGroup& group, InFlight& f, absl::Span<float> out,
                      absl::Span<float> dense_out, float divisor, ExchangeStats* stats,
                      const DeviceCall* device = nullptr);

  // Only the agreement of step 3 (spec, n, step, bucket; no frames) over
  // `group`. The hierarchical exchange runs it over the whole world first:
  // its node-local stages cannot see a disagreement between nodes, and
  // would otherwise wait for a peer that never comes (a timeout) instead
  // of reporting the mismatch.
  absl::Status Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step, uint64_t n,
                     ExchangeStats* stats);

 private:
  static constexpr size_t kDescriptorBytes = sizeof(Descriptor);
  // docs/wire_format.md, "Exchange block".
  static_assert(kDescriptorBytes == 48 && kBlockPrefixBytes == 56,
                "the exchange block's offsets are normative");

  // A bucket's shape, agreed by every rank of the group.
  struct Shape {
    uint64_t n;
    uint64_t dense_n;
  };

  // The largest bounded block any rank can send for a bucket of this shape.
  uint64_t BlockCapacity(uint64_t n, uint64_t dense_n) const;

  // Bytes of the dense section's frame for n elements (0 for none).
  size_t DenseSectionBytes(uint64_t n) const;

  // Checks the gathered descriptor table; identical verdict on every rank.
  // check_frames: also bound each frame length by what the codec can
  // produce (not in Agree, which exchanges no frame).
  absl::Status CheckTable(const transport::GlooGroup& group, absl::Span<const Descriptor> table,
                          const Descriptor& mine, bool check_frames) const;

  const Codec& codec_;
  const std::unique_ptr<Codec> dense_codec_;  // "none": the dense section
  const FrameSigner& auth_;
  const uint64_t spec_fingerprint_;

  // Reused across calls (grown, never shrunk).
  InFlight run_;                                         // Run's own
  std::vector<Descriptor> agree_;                        // Agree's table (Transfer's thread)
  // Buckets whose shape every rank agreed on in an exchange that
  // succeeded (Transfer's thread); cleared on any failure.
  std::map<uint32_t, Shape> agreed_;
  std::vector<absl::Span<const uint8_t>> frames_;        // Finish
  std::vector<absl::Span<const uint8_t>> dense_frames_;  // Finish
  std::vector<float> dense_sum_;                         // Finish
  CodecScratch decode_scratch_;                          // Finish
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_SPARSE_ALLGATHER_H_
