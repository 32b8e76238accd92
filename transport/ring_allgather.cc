#include "gradwire/transport/ring_allgather.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "absl/strings/str_cat.h"
#include "gloo/types.h"
#include "gradwire/base/coding.h"
#include "gradwire/transport/bounded_block.h"
#include "gradwire/transport/gloo_status.h"

namespace gradwire {
namespace transport {
namespace {

// Slot prefix of our messages (Gloo's algorithms use 0x01..0x08,
// direct_allgather 0x20, sealed_ring 0x21); the low 24 bits number the
// ring's steps.
constexpr uint8_t kRingAllgatherSlotPrefix = 0x22;
constexpr uint8_t kRingBoundedSlotPrefix = 0x26;

// Both rings: `sizes` lays out `out` and sizes the receives. Plain blocks
// (bounded == false) are sent whole; bounded ones as long as their header
// says, this rank's own as mine_bytes.
absl::Status Ring(gloo::Context* context, uint8_t slot_prefix, bool bounded, uint32_t tag,
                  const uint8_t* mine, uint64_t mine_bytes, absl::Span<const uint64_t> sizes,
                  uint8_t* out, absl::Duration timeout, absl::string_view what) {
  const int rank = context->rank;
  const int size = context->size;
  std::vector<uint64_t> offsets(size + 1, 0);
  for (int r = 0; r < size; ++r) offsets[r + 1] = offsets[r] + sizes[r];
  if (mine_bytes > 0) std::memcpy(out + offsets[rank], mine, mine_bytes);
  // The bytes to send of block b (which is in `out` by then).
  absl::Status bad;
  auto length = [&](int b) -> uint64_t {
    if (!bounded) return sizes[b];
    if (b == rank) return mine_bytes;
    const uint64_t n = BoundedBlockLength(out + offsets[b], sizes[b]);
    if (n == 0 && bad.ok()) {
      bad = absl::DataLossError(absl::StrCat(
          what, ": the block of group rank ", b, " (forwarded by group rank ",
          (rank + size - 1) % size, ") announces ", DecodeFixed64(out + offsets[b]),
          " bytes, outside [", kBoundedHeaderBytes, ", ", sizes[b], "]"));
    }
    return n;
  };
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  // The block rank sends at step t (0 <= t < P), and receives at step t - 1.
  auto block = [&](int t) { return (rank - t + size) % size; };
  // Step t's messages travel on a slot of their own (P - 1 < 2^24 steps).
  const uint64_t slot = gloo::Slot::build(slot_prefix, tag);
  // One buffer per step and direction, over the block's place in `out`.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> send(size), recv(size);
  const auto deadline = std::chrono::steady_clock::now() + GlooTimeout(timeout);
  absl::Status status = CallGloo(what, [&] {
    // Every receive is posted at once: each lands in a block of its own,
    // written by nothing else, and the left neighbour's sends then flow
    // without waiting for a notice of each.
    for (int t = 0; t < size - 1; ++t) {
      const int b = block(t + 1);
      if (sizes[b] == 0) continue;
      recv[t] = context->createUnboundBuffer(out + offsets[b], sizes[b]);
      recv[t]->recv(prev, slot + t);
    }
    auto wait_receive = [&](int t) {
      if (recv[t] != nullptr && !recv[t]->waitRecv(nullptr, GlooTimeoutUntil(deadline))) {
        throw gloo::IoException("ring allgather: receive aborted");
      }
    };
    for (int t = 0; t < size - 1; ++t) {
      if (t > 0) wait_receive(t - 1);  // block(t) is ours at t = 0, else came in at t - 1
      const int b = block(t);
      const uint64_t bytes = length(b);
      if (!bad.ok()) return;  // the ring stops here; the status path closes it
      if (bytes == 0) continue;
      send[t] = context->createUnboundBuffer(out + offsets[b], bytes);
      send[t]->send(next, slot + t);
    }
    wait_receive(size - 2);
    for (int t = 0; t < size - 1; ++t) {
      if (send[t] != nullptr && !send[t]->waitSend(nullptr, GlooTimeoutUntil(deadline))) {
        throw gloo::IoException("ring allgather: send aborted");
      }
    }
  });
  if (status.ok()) status = bad;
  // Receives not waited for may still be posted into `out`, sends from it:
  // no pair may touch them once the buffers go.
  if (!status.ok()) CloseConnections(context);
  return status;
}

}  // namespace

absl::Status RingAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                            absl::Span<const uint64_t> sizes, uint8_t* out, absl::Duration timeout,
                            absl::string_view what) {
  return Ring(context, kRingAllgatherSlotPrefix, /*bounded=*/false, tag, mine,
              sizes[context->rank], sizes, out, timeout, what);
}

absl::Status RingAllgathervBounded(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                                   uint64_t mine_bytes, absl::Span<const uint64_t> capacities,
                                   uint8_t* out, absl::Duration timeout, absl::string_view what) {
  return Ring(context, kRingBoundedSlotPrefix, /*bounded=*/true, tag, mine, mine_bytes,
              capacities, out, timeout, what);
}

}  // namespace transport
}  // namespace gradwire
