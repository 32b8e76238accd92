// What gradient exchange cost: bytes on the wire and where the time went.
//
// One ExchangeStats describes one collective, one training step, or a
// running total (Add). Bytes are payload bytes this rank handed to / took
// from the transport (transfer_stats.h), so they compare with the byte
// floors in the design notes. The times split an exchange the way a user
// tuning compression needs to see it:
//   compress_time  encode (with error feedback) + decode-accumulate +
//                  averaging: what compression costs in compute;
//   auth_time      signing and verifying frame MACs;
//   wire_time      inside transport calls (network, and slower peers);
//   sync_time      the part of wire_time spent in the transport's
//                  agreement rounds, which end only once every peer has
//                  arrived: mostly waiting for the slowest peer (still
//                  compressing, or, ranks sharing cores, descheduled).
//                  wire_time - sync_time is the transfer proper;
//   wait_time      the training thread blocked waiting for results (the
//                  part of the exchange that did not overlap backprop);
//   copy_time      writing averaged buckets back into the caller's
//                  tensors (GradientExchanger);
//   span_time      GradientExchanger: wall time from the step's first
//                  bucket entering the pipeline to its last bucket written
//                  back: the step's critical path as it ran. With the CPU
//                  stages (compress + auth + copy) overlapping the wire,
//                  it approaches max(cpu, wire) instead of their sum;
//                  OverlapFraction() says how close it came.
#ifndef GRADWIRE_LIB_COMM_EXCHANGE_STATS_H_
#define GRADWIRE_LIB_COMM_EXCHANGE_STATS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "gradwire/transport/transfer_stats.h"

namespace gradwire {

struct ExchangeStats {
  uint64_t dense_buckets = 0;       // exchanged with the dense allreduce
  uint64_t compressed_buckets = 0;  // exchanged through a codec
  // Of compressed_buckets: those the sparse allreduce (sparse_allreduce.h)
  // averaged (the rest took the sparse allgather or the cast allreduce).
  uint64_t sparse_allreduce_buckets = 0;
  // Of compressed_buckets: those the cast allreduce (cast_allreduce.h)
  // averaged.
  uint64_t cast_allreduce_buckets = 0;
  uint64_t elements = 0;  // gradient elements averaged
  // NaN or infinite elements of g + e_old that this rank's codecs met in
  // compressed buckets: they travel as 0 and stay in the residual
  // (codec.h). Non-zero is a diverging run's first sign; the dense path
  // carries them as they are and does not count them.
  uint64_t nonfinite = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // The part of the bytes above that stayed inside a node (hierarchical
  // mode's reduce-scatter and allgather): on a real cluster these cross
  // NVLink/PCIe, not the Ethernet the rest crosses.
  uint64_t intra_node_bytes_sent = 0;
  uint64_t intra_node_bytes_received = 0;
  absl::Duration compress_time = absl::ZeroDuration();
  absl::Duration auth_time = absl::ZeroDuration();
  absl::Duration wire_time = absl::ZeroDuration();
  absl::Duration sync_time = absl::ZeroDuration();  // within wire_time
  absl::Duration wait_time = absl::ZeroDuration();
  absl::Duration copy_time = absl::ZeroDuration();
  absl::Duration span_time = absl::ZeroDuration();

  void Add(const ExchangeStats& other);

  // Books one transport call: its bytes, wire time and agreement (sync)
  // time.
  void AddCall(const transport::CallStats& call);

  // CPU-stage time: compress + auth + copy.
  absl::Duration cpu_time() const { return compress_time + auth_time + copy_time; }

  // How much of the shorter of cpu_time() and wire_time ran hidden under
  // the other: (cpu + wire - span) / min(cpu, wire), clamped to [0, 1].
  // 0 when run back to back (span = cpu + wire), 1 when span = max(cpu,
  // wire). Idle time in the span (waiting for submissions) counts against
  // it. 0 without a span or when either part is zero.
  double OverlapFraction() const;

  // One line, e.g. "3 buckets (1 dense, 2 compressed), 1200000 elements:
  // sent 1500000 B (0 B intra-node), received 4400000 B (0 B intra-node);
  // compress 3.100 ms, auth 0.200 ms, wire 12.000 ms (sync 2.000 ms),
  // wait 4.000 ms",
  // then "; 2 by sparse allreduce" when any were, then "; copy 1.000 ms, span 13.000 ms, overlap
  // 80%" when it has a span.
  std::string ToString() const;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_EXCHANGE_STATS_H_
