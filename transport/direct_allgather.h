// Allgatherv with every block sent straight to every peer: one message hop
// where the ring (ring_allgather.h) takes P - 1 in sequence (see
// GroupOptions::direct_allgather_max_ranks). GlooGroup uses it for its
// agreement round and for allgathervs of small blocks.
//
// Each peer's block lands through a receive of its own, so a failed
// exchange knows whose blocks had arrived: the agreement round's errors
// name the ranks that never came.
//
// Receives go through a window (receive_window.h): at most `window` peers
// send into a rank at once, against TCP incast.
#ifndef GRADWIRE_TRANSPORT_DIRECT_ALLGATHER_H_
#define GRADWIRE_TRANSPORT_DIRECT_ALLGATHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/transport/agreement.h"
#include "gradwire/transport/gloo_fwd.h"

namespace gradwire {
namespace transport {

// Gathers every rank's block of `context`'s group in rank order into
// `out`. `sizes` (identical on every rank) holds each rank's block size;
// `mine` holds sizes[context->rank] bytes and `out` their sum. Zero-byte
// blocks are not sent (both sides know the sizes). `tag` keeps concurrent
// exchanges apart (every rank passes the same). The whole exchange has
// one deadline, `timeout` from the call. `window`: how many receives are
// posted at once (peers in staggered order, r - 1, r - 2, ...); 0 or at
// least size() - 1 posts them all.
//
// Errors (DeadlineExceeded for a timeout, Unavailable for a closed
// connection, as CallGloo maps them) start with `what`. `*arrivals`
// (size() entries) says which peers arrived: a peer has once its block
// came and it took ours (Gloo completes a send when the receiver has
// posted its receive). On failure the kMissing ones are the peers this
// rank was waiting for; a peer with zero-byte blocks both ways is
// kUnknown.
absl::Status DirectAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                              absl::Span<const uint64_t> sizes, uint8_t* out,
                              absl::Duration timeout, int window, absl::string_view what,
                              std::vector<Arrival>* arrivals);

// The same gather of bounded blocks (bounded_block.h,
// GlooGroup::AllgathervBounded): `capacities` (identical on every rank)
// lays out `out` and sizes each receive, and this rank sends only its
// mine_bytes (<= capacities[rank]); a shorter message fills the front of
// its place. Its own slot prefix keeps these messages apart from
// DirectAllgatherv's. The caller reads each block's length from its header.
absl::Status DirectAllgathervBounded(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                                     uint64_t mine_bytes, absl::Span<const uint64_t> capacities,
                                     uint8_t* out, absl::Duration timeout, int window,
                                     absl::string_view what, std::vector<Arrival>* arrivals);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_DIRECT_ALLGATHER_H_
