#include "gradwire/transport/direct_allgather.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/receive_window.h"

namespace gradwire {
namespace transport {
namespace {

// Slot prefix of our messages; Gloo's own algorithms use 0x01..0x08
// (gloo/types.h).
constexpr uint8_t kDirectAllgatherSlotPrefix = 0x20;
constexpr uint8_t kDirectBoundedSlotPrefix = 0x25;  // sparse_collectives.cc has 0x21..0x23

// A wait that only asks whether an operation already completed.
constexpr std::chrono::milliseconds kAtOnce(0);

// Both gathers: `sizes` lays out `out` and sizes the receives; this rank
// sends mine_bytes (sizes[rank] but for bounded blocks).
absl::Status Gather(gloo::Context* context, uint8_t slot_prefix, uint32_t tag, const uint8_t* mine,
                    uint64_t mine_bytes, absl::Span<const uint64_t> sizes, uint8_t* out,
                    absl::Duration timeout, int window, absl::string_view what,
                    std::vector<Arrival>* arrivals) {
  const int rank = context->rank;
  const int size = context->size;
  std::vector<uint64_t> offsets(size + 1, 0);
  for (int r = 0; r < size; ++r) offsets[r + 1] = offsets[r] + sizes[r];
  arrivals->assign(size, Arrival::kArrived);
  if (mine_bytes > 0) std::memcpy(out + offsets[rank], mine, mine_bytes);
  const uint64_t slot = gloo::Slot::build(slot_prefix, tag);
  // One buffer per peer and direction: a buffer counts completions but
  // does not say whose, and a failed exchange must know. A send completes
  // once the peer has posted its receive, so it shows the peer arrived too.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> send(size), recv(size);
  std::vector<bool> sent(size, false), received(size, false);
  const ReceiveWindow receives(rank, size, window, [&](int from) { return sizes[from] > 0; });
  const auto deadline = std::chrono::steady_clock::now() + GlooTimeout(timeout);
  auto post_receive = [&](int from) {
    recv[from] = context->createUnboundBuffer(out + offsets[from], sizes[from]);
    recv[from]->recv(from, slot);
  };
  absl::Status status = CallGloo(what, [&] {
    // Receives first (receive_window.h says why).
    const std::vector<int>& sources = receives.sources();
    for (size_t j = 0; j < receives.in_flight(); ++j) post_receive(sources[j]);
    // Every send is posted at once: a send only announces the block, and
    // its bytes move when the receiver posts the matching receive.
    for (int i = 1; i < size; ++i) {
      const int to = (rank + i) % size;
      if (mine_bytes > 0) {
        send[to] = context->createUnboundBuffer(const_cast<uint8_t*>(mine), mine_bytes);
        send[to]->send(to, slot);
      }
    }
    // Gloo throws IoException on a timeout or a dead peer; false means
    // the wait was aborted. Waited for in posting order; each completed
    // receive opens the window for the next source.
    for (size_t j = 0; j < sources.size(); ++j) {
      const int from = sources[j];
      if (!recv[from]->waitRecv(nullptr, GlooTimeoutUntil(deadline))) {
        throw gloo::IoException("direct allgather: receive aborted");
      }
      received[from] = true;
      if (const int next = receives.PostAfter(j + 1); next >= 0) post_receive(next);
    }
    for (int i = 1; i < size; ++i) {
      const int to = (rank + i) % size;
      if (send[to] == nullptr) continue;
      if (!send[to]->waitSend(nullptr, GlooTimeoutUntil(deadline))) {
        throw gloo::IoException("direct allgather: send aborted");
      }
      sent[to] = true;
    }
  });
  if (!status.ok()) {
    // The wait that failed stopped the others: ask each operation not yet
    // waited for whether it completed. A completed one answers at once
    // (Gloo counts completions before it looks for an error); any other
    // throws (the failure closed every pair) or times out.
    for (int r = 0; r < size; ++r) {
      if (recv[r] != nullptr && !received[r]) {
        (void)CallGloo(what, [&] { received[r] = recv[r]->waitRecv(nullptr, kAtOnce); });
      }
      if (send[r] != nullptr && !sent[r]) {
        (void)CallGloo(what, [&] { sent[r] = send[r]->waitSend(nullptr, kAtOnce); });
      }
    }
    // Receives not waited for may still be posted into `out`, sends from
    // `mine`: no pair may touch them once the buffers go.
    CloseConnections(context);
  }
  // A peer arrived once its block came and it took ours; a zero-byte
  // block in both directions tells nothing.
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    // A block expected but never received (its receive waited or not yet
    // posted when the exchange failed) is missing.
    const bool wanted = sizes[r] > 0;
    const bool missing = (wanted && !received[r]) || (send[r] != nullptr && !sent[r]);
    const bool silent = !wanted && send[r] == nullptr;
    (*arrivals)[r] = missing ? Arrival::kMissing : silent ? Arrival::kUnknown : Arrival::kArrived;
  }
  return status;
}

}  // namespace

absl::Status DirectAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                              absl::Span<const uint64_t> sizes, uint8_t* out,
                              absl::Duration timeout, int window, absl::string_view what,
                              std::vector<Arrival>* arrivals) {
  return Gather(context, kDirectAllgatherSlotPrefix, tag, mine, sizes[context->rank], sizes, out,
                timeout, window, what, arrivals);
}

absl::Status DirectAllgathervBounded(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                                     uint64_t mine_bytes, absl::Span<const uint64_t> capacities,
                                     uint8_t* out, absl::Duration timeout, int window,
                                     absl::string_view what, std::vector<Arrival>* arrivals) {
  return Gather(context, kDirectBoundedSlotPrefix, tag, mine, mine_bytes, capacities, out, timeout,
                window, what, arrivals);
}

}  // namespace transport
}  // namespace gradwire
