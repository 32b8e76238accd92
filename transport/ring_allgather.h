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

// DirectAllgatherv's gather (direct_allgather.h: the same `sizes`, `mine`,
// `out`, `tag`, one deadline and `what`) for a group of size > 1, by ring,
// with no window and no report of who arrived. On failure `out` is partly
// written and the context's connections are closed.
absl::Status RingAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                            absl::Span<const uint64_t> sizes, uint8_t* out, absl::Duration timeout,
                            absl::string_view what);

// The same ring over bounded blocks (bounded_block.h,
// GlooGroup::AllgathervBounded): `capacities` (identical on every rank)
// lays out `out` and sizes each receive; this rank sends its mine_bytes,
// and forwards each block it received as long as its header says (the
// caller clears the headers of the other ranks' places first). A received
// header outside [kBoundedHeaderBytes, its capacity] stops the ring:
// DataLoss naming the rank whose block it was, the connections closed
// (the peers waiting on this rank fail too). Its own slot prefix keeps
// these messages apart from RingAllgatherv's.
absl::Status RingAllgathervBounded(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                                   uint64_t mine_bytes, absl::Span<const uint64_t> capacities,
                                   uint8_t* out, absl::Duration timeout, absl::string_view what);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_RING_ALLGATHER_H_
