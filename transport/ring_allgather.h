// Allgatherv around the ring, for groups and blocks past the direct
// exchange's reach (GroupOptions::direct_allgather_max_ranks and
// direct_allgatherv_max_block_bytes).
//
// P - 1 steps. At step t rank r receives block (r - t - 1) mod P from
// rank r - 1 into its place in `out`, and sends rank r + 1 the block it
// received at step t - 1 (its own at step 0) from there. A step's send is
// posted once the previous step's receive completed, without waiting for
// the previous send: a slow right neighbour holds this rank's sends, not
// its receives, until the last step.
//
// Unlike Gloo's allgatherv, which frees its buffers as its exception
// unwinds while its event-loop thread may still be reading into one, a
// failed ring closes the context's connections before its buffers go: no
// pair touches `out` (or the buffers) once it returns.
#ifndef GRADWIRE_TRANSPORT_RING_ALLGATHER_H_
#define GRADWIRE_TRANSPORT_RING_ALLGATHER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/transport/gloo_fwd.h"

namespace gradwire {
namespace transport {

// Gathers every rank's block of `context`'s group (size > 1) in rank order
// into `out`. `sizes` (identical on every rank) holds each rank's block
// size; `mine` holds sizes[context->rank] bytes and `out` their sum.
// Zero-byte blocks are not sent (both sides know the sizes). `tag` keeps
// concurrent exchanges apart (every rank passes the same). One deadline
// for the whole ring, `timeout` from the call. Errors (DeadlineExceeded
// for a timeout, Unavailable for a closed connection, as CallGloo maps
// them) start with `what`; on failure `out` is partly written and the
// context's connections are closed.
absl::Status RingAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                            absl::Span<const uint64_t> sizes, uint8_t* out,
                            absl::Duration timeout, absl::string_view what);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_RING_ALLGATHER_H_
