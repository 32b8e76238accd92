// What one collective cost on the wire, and running totals.
//
// Bytes are payload bytes this rank handed to / took from the transport,
// counted from each algorithm's schedule (TCP and Gloo headers excluded),
// so they compare directly with the byte floors in the design notes.
// Wire time is wall time inside the transport call, agreement round
// included: time this rank was blocked on the network or on slower peers.
// Agree time is the part of it spent in the agreement round, which no
// rank leaves before the last one has arrived: one small message per
// peer, plus however long this rank waited for its slowest peer to reach
// the collective (still compressing, or descheduled). wire - agree is the
// transfer proper, with every rank present.
#ifndef GRADWIRE_TRANSPORT_TRANSFER_STATS_H_
#define GRADWIRE_TRANSPORT_TRANSFER_STATS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace gradwire {
namespace transport {

struct CallStats {
  const char* op = "";  // static string: "allreduce_ring", "allgatherv", ...
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  absl::Duration wire_time = absl::ZeroDuration();
  absl::Duration agree_time = absl::ZeroDuration();  // within wire_time
  // Sealed collectives: time in the caller's ChunkAuthenticator (sealing
  // and verifying chunks), within wire_time.
  absl::Duration auth_time = absl::ZeroDuration();

  std::string ToString() const {
    return absl::StrFormat("%s: sent %d B, received %d B, %.3f ms (%.3f ms agreeing)", op,
                           bytes_sent, bytes_received, absl::ToDoubleMilliseconds(wire_time),
                           absl::ToDoubleMilliseconds(agree_time));
  }
};

struct TransferTotals {
  uint64_t calls = 0;
  uint64_t failed_calls = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  absl::Duration wire_time = absl::ZeroDuration();
  absl::Duration agree_time = absl::ZeroDuration();

  void Add(const CallStats& call) {
    ++calls;
    bytes_sent += call.bytes_sent;
    bytes_received += call.bytes_received;
    wire_time += call.wire_time;
    agree_time += call.agree_time;
  }

  std::string ToString() const {
    return absl::StrFormat("%d calls (%d failed): sent %d B, received %d B, %.3f ms on the wire",
                           calls, failed_calls, bytes_sent, bytes_received,
                           absl::ToDoubleMilliseconds(wire_time));
  }
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_TRANSFER_STATS_H_
