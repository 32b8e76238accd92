#include "gradwire/transport/direct_allgather.h"

#include <chrono>
#include <cstring>
#include <memory>

#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "gradwire/transport/gloo_status.h"

namespace gradwire {
namespace transport {
namespace {

// Slot prefix of our messages; Gloo's own algorithms use 0x01..0x08
// (gloo/types.h).
constexpr uint8_t kDirectAllgatherSlotPrefix = 0x20;

// A wait that only asks whether an operation already completed.
constexpr std::chrono::milliseconds kAtOnce(0);

}  // namespace

absl::Status DirectAllgatherv(gloo::Context* context, uint32_t tag, const uint8_t* mine,
                              absl::Span<const uint64_t> sizes, uint8_t* out,
                              absl::Duration timeout, absl::string_view what,
                              std::vector<Arrival>* arrivals) {
  const int rank = context->rank;
  const int size = context->size;
  std::vector<uint64_t> offsets(size + 1, 0);
  for (int r = 0; r < size; ++r) offsets[r + 1] = offsets[r] + sizes[r];
  arrivals->assign(size, Arrival::kArrived);
  if (sizes[rank] > 0) std::memcpy(out + offsets[rank], mine, sizes[rank]);
  const uint64_t slot = gloo::Slot::build(kDirectAllgatherSlotPrefix, tag);
  // One buffer per peer and direction: a buffer counts completions but
  // does not say whose, and a failed exchange must know. A send completes
  // once the peer has posted its receive, so it shows the peer arrived too.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> send(size), recv(size);
  std::vector<bool> sent(size, false), received(size, false);
  const auto deadline = std::chrono::steady_clock::now() + GlooTimeout(timeout);
  absl::Status status = CallGloo(what, [&] {
    // Peers in staggered order: rank r first sends to r + 1 and receives
    // from r - 1, so no single rank is everyone's first destination.
    for (int i = 1; i < size; ++i) {
      const int to = (rank + i) % size;
      const int from = (rank - i + size) % size;
      if (sizes[rank] > 0) {
        send[to] = context->createUnboundBuffer(const_cast<uint8_t*>(mine), sizes[rank]);
        send[to]->send(to, slot);
      }
      if (sizes[from] > 0) {
        recv[from] = context->createUnboundBuffer(out + offsets[from], sizes[from]);
        recv[from]->recv(from, slot);
      }
    }
    // Gloo throws IoException on a timeout or a dead peer; false means
    // the wait was aborted.
    for (int i = 1; i < size; ++i) {
      const int from = (rank - i + size) % size;
      if (recv[from] == nullptr) continue;
      if (!recv[from]->waitRecv(nullptr, GlooTimeoutUntil(deadline))) {
        throw gloo::IoException("direct allgather: receive aborted");
      }
      received[from] = true;
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
  }
  // A peer arrived once its block came and it took ours; a zero-byte
  // block in both directions tells nothing.
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const bool missing = (recv[r] != nullptr && !received[r]) || (send[r] != nullptr && !sent[r]);
    const bool silent = recv[r] == nullptr && send[r] == nullptr;
    (*arrivals)[r] = missing ? Arrival::kMissing : silent ? Arrival::kUnknown : Arrival::kArrived;
  }
  return status;
}

}  // namespace transport
}  // namespace gradwire
