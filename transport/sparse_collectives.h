// Collectives for sparse exchanges over a GlooGroup, built so that a
// bucket never pays a round of P - 1 sequential messages for agreement or
// for sizes (GlooGroup's agreement round is a ring allgather above
// GroupOptions::direct_allgather_max_ranks ranks):
//
//   AllreduceU32 / AllreduceU64  element-wise sum, min or max of a small
//       vector, 2 (P-1)/P of it each way for vectors of kHalvingMinBytes
//       or more: where the group gathers directly (P <= 16 by default), a
//       reduce-scatter and an allgather of concurrent messages, 2 steps;
//       from 8 ranks up, a reduce-scatter by recursive halving and an
//       allgather by recursive doubling (Rabenseifner), 2 log2 P steps.
//       Smaller vectors: recursive doubling, log2 P exchanges of the whole
//       vector. When P is not a power of two, the ranks past the largest
//       power of two fold in first and are told the result last (two
//       exchanges more).
//   AlltoallvBounded  every rank sends one block to every other rank: one
//       round of P - 1 messages each way, at most
//       GroupOptions::receive_window of them flowing into a rank, and as
//       many out of it, at once.
//   AllgathervBounded  every rank's block reaches every rank in
//       ceil(log2 P) steps (Bruck's algorithm, any P), each step one
//       message each way; every block crosses each rank's link once.
//
// There is no size round: a receive is posted at a capacity ("cap") that
// every rank derives from values the caller has already agreed on, and
// each message carries its own length. Likewise no agreement round: the
// caller must have agreed, by an earlier collective, on everything that
// sizes a receive. Gloo terminates a process that is sent a message larger
// than the posted receive, so a block larger than its cap is refused
// before anything is sent; since peers may already be waiting for it, the
// refusal poisons the group.
//
// Otherwise these follow GlooGroup's contract (gloo_group.h): Status, not
// exceptions; one deadline per call (GroupOptions::timeout); a transport
// failure poisons the group and closes its connections; every call is
// booked in the group's last_call() and totals() (no agreement time).
// Integer reductions are exact and order-free, so every rank gets the
// same result whatever the schedule.
#ifndef GRADWIRE_TRANSPORT_SPARSE_COLLECTIVES_H_
#define GRADWIRE_TRANSPORT_SPARSE_COLLECTIVES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {
namespace transport {

enum class ReduceOp { kSum, kMin, kMax };

class SparseCollectives {
 public:
  // Bytes a message adds to each block (its length, u64 little endian).
  static constexpr uint64_t kLengthBytes = 8;
  // Allreduces of at least this many bytes (on 8 ranks or more) halve and
  // double instead of doubling the whole vector.
  static constexpr uint64_t kHalvingMinBytes = 256;
  // Whether an allreduce of `bytes` over `ranks` ranks halves and doubles
  // (2 log2 P steps) rather than doubles (log2 P steps).
  static bool UsesHalving(int ranks, uint64_t bytes);

  // Whether `group`'s own small Allgather (and agreement round) is one
  // direct round of concurrent messages (P <= GroupOptions::
  // direct_allgather_max_ranks) rather than a ring of P - 1 steps.
  static bool GathersDirectly(const GlooGroup& group) { return group.UseDirectAllgather(); }

  // In place: data[i] = op over ranks of data[i]. Every rank passes the
  // same length (the caller agreed on it; a different length is a caller
  // bug that Gloo may turn into a process abort). Sums wrap modulo 2^32
  // or 2^64.
  static absl::Status AllreduceU32(GlooGroup& group, absl::Span<uint32_t> data, ReduceOp op);
  static absl::Status AllreduceU64(GlooGroup& group, absl::Span<uint64_t> data, ReduceOp op);

  // blocks[j] goes to rank j (blocks[rank()] stays here); caps[j] is the
  // most any rank sends to rank j, the same table on every rank. On
  // success received[r] is rank r's block to this rank, a view into
  // *scratch (or into blocks[rank()]), valid until scratch is next used.
  // *scratch is grown to (P - 1) * (caps[rank()] + kLengthBytes) bytes
  // plus the outgoing messages, and reused. receive_window: how many
  // receives a rank keeps posted (receive_window.h; unset: the group's
  // GroupOptions::receive_window), and how many sends (to r + 1, r + 2,
  // ..., the next posted as one completes). 1 makes each wave a ring of
  // single flows, which bulk blocks of megabytes want: several flows into
  // one link share it no faster and lose packets to each other.
  static absl::Status AlltoallvBounded(GlooGroup& group,
                                       absl::Span<const absl::Span<const uint8_t>> blocks,
                                       absl::Span<const uint64_t> caps,
                                       std::vector<uint8_t>* scratch,
                                       absl::Span<absl::Span<const uint8_t>> received,
                                       std::optional<int> receive_window = std::nullopt);

  // Every rank's block to every rank. caps[r] bounds rank r's block and
  // total_cap all blocks together (the same values on every rank; pass
  // the sum of caps when there is no better bound). On success
  // received[r] is rank r's block, a view into *scratch (or `mine`).
  static absl::Status AllgathervBounded(GlooGroup& group, absl::Span<const uint8_t> mine,
                                        absl::Span<const uint64_t> caps, uint64_t total_cap,
                                        std::vector<uint8_t>* scratch,
                                        absl::Span<absl::Span<const uint8_t>> received);

 private:
  template <typename T>
  static absl::Status Allreduce(GlooGroup& group, absl::Span<T> data, ReduceOp op,
                                const char* name);
  // One call of a collective: its group, its name (a static string, as in
  // CallStats) and when it started.
  struct Call {
    GlooGroup* group;
    const char* op;
    absl::Time start;
  };
  // What every collective does first: refuses an unusable group, else
  // starts the clock of a call named `op`.
  static absl::StatusOr<Call> Start(GlooGroup& group, const char* op);
  // Books a finished call in the group's counters; poisons the group on
  // a failure when `poison`.
  static absl::Status Finish(const Call& call, uint64_t sent, uint64_t received,
                             absl::Status status, bool poison);
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_SPARSE_COLLECTIVES_H_
