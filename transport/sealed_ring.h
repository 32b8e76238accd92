// Ring reduce-scatter, allgather and allreduce of fp32 in which every
// chunk on the wire is authenticated (sealed) by the caller's
// ChunkAuthenticator. GlooGroup's Sealed* collectives run it after their
// agreement round; it talks to Gloo's pairs directly (unbound buffers), as
// direct_allgather does.
//
// The buffer is cut into P chunks (chunk c: counts[c] elements from the sum
// of the counts before it) and each chunk into segments of at most
// segment_bytes, so the ring is pipelined: a segment moves on as soon as
// it has been verified (and summed), while later ones are in flight. Rank r
// sends to r + 1 and receives from r - 1. Message (t, j) is segment j of
// the chunk rank r sends at ring step t, chunk (r - 1 - t) mod P, followed
// by its trailer:
//   reduce-scatter, steps 0 .. P-2: a partial sum. The receiver verifies
//     it, adds its own elements and seals the result as its own message of
//     step t + 1; at step P-2 the received chunk is chunk r, now complete.
//   allgather, steps P-1 .. 2P-3: a complete chunk, sealed once by the
//     rank that owns it (chunk c belongs to rank c) and forwarded as it
//     came, each receiver verifying it before copying it out.
// Every rank therefore verifies every byte it takes in before using it, and
// a rank without the job's key can neither add to a sum nor replace one.
// Without an authenticator (args.auth null) the same ring runs plain: no
// trailers, nothing sealed or verified (GlooGroup::AllreduceSum's ring).
//
// Arithmetic: chunk c is summed in ring order starting after its owner,
//   ((x[c+1] + x[c+2]) + x[c+3]) + ... + x[c]   (ranks mod P, fp32),
// the same on every rank and every run; the allgather copies the owner's
// result, so every rank ends with bit-identical sums.
#ifndef GRADWIRE_TRANSPORT_SEALED_RING_H_
#define GRADWIRE_TRANSPORT_SEALED_RING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_fwd.h"

namespace gradwire {
namespace transport {

enum class RingPhases {
  kReduceScatter,  // rank r ends with the sum of chunk r, at its place in the buffer
  kAllgather,      // every rank brings its chunk r; every rank ends with every chunk
  kAllreduce,      // both: every rank ends with the whole sum
};

struct SealedRingArgs {
  gloo::Context* context = nullptr;  // size > 1
  // The group's collective number (the same on every rank): picks the
  // messages' Gloo slots and is bound into every chunk's context.
  uint32_t call = 0;
  // Null: the plain ring (no trailers).
  const ChunkAuthenticator* auth = nullptr;
  ChunkScope scope;
  // World rank of each group rank: sealers in the contexts, names in errors.
  absl::Span<const int> world_ranks;
  absl::Duration timeout;  // of the whole ring, from the call
  // Largest segment (a multiple of 4; the same on every rank). Raised as
  // far as needed to keep a call within Gloo's 2^24 slots.
  uint64_t segment_bytes = 1 << 20;
};

struct SealedRingStats {
  uint64_t bytes_sent = 0;  // segments and trailers
  uint64_t bytes_received = 0;
  absl::Duration auth_time = absl::ZeroDuration();  // in Seal and Verify
};

// The ring over `data` (counts.size() == P chunks summing to data.size(),
// agreed by every rank). `scratch` holds the partial sums in flight: two
// buffers per segment of the largest chunk, so about 2 n / P floats (kept
// by the caller across calls; an allgather alone needs none). On failure `data` is
// partially written, and the context's connections are closed before the
// ring's buffers are freed (operations may still be posted on them), so no
// pair writes into `data` or `scratch` after it returns: DeadlineExceeded / Unavailable
// from Gloo, Unauthenticated naming the rank whose chunk failed to verify,
// Internal if sealing failed.
absl::Status SealedRing(const SealedRingArgs& args, RingPhases phases, absl::Span<float> data,
                        absl::Span<const uint64_t> counts, std::vector<float>* scratch,
                        SealedRingStats* stats);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_SEALED_RING_H_
