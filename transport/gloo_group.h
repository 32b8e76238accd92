// A group of ranks joined by Gloo's TCP transport, with byte- and
// float-level collectives that return absl::Status.
//
// GlooGroup knows nothing of codecs: it moves bytes and sums floats.
//
// Safety properties (each is a bug users hit in other Gloo front ends):
//   - Nothing throws. Gloo's exceptions become Unavailable (a peer died or
//     closed the connection) or DeadlineExceeded (a peer stalled past the
//     timeout); a broken Gloo invariant becomes Internal.
//   - Every collective starts with an agreement round: all ranks exchange
//     a fixed-size descriptor (operation, element count, a hash of shared
//     arguments such as the size table). If ranks disagree, every rank
//     returns InvalidArgument "collective mismatch ..." naming the ranks,
//     before any variable-size receive is posted: Gloo terminates the
//     process when a message is larger than the posted receive. Because
//     every rank sees the same descriptors, a mismatch is detected by all
//     ranks together and leaves the group usable.
//   - Any transport failure poisons the group: every later call returns
//     FailedPrecondition "poisoned by earlier failure: ..." until the
//     caller builds a new group (under a fresh store scope). The poisoned
//     group closes its connections so peers fail fast too.
//   - Every wait is bounded by GroupOptions::timeout; rendezvous waits by
//     the store's timeout.
//   - A deadline error names who is missing. The agreement round knows
//     whose descriptors arrived, so a rank that stops (SIGSTOP, a swap
//     storm, a debugger) between collectives is named on every survivor:
//     "allgather: agreement round: rank 2 did not arrive within 30s
//     (ranks [0, 1, 3] did)". Past the round, a direct gather names the
//     ranks whose blocks did not come; a ring, the neighbours it waits on.
//   - A failed collective leaves no receive posted into memory that is
//     freed: our own rings and gathers close the connections before their
//     buffers go (Gloo's allreduce and allgathers freed theirs while its
//     event-loop thread could still be reading into them). Gloo's
//     halving-doubling algorithms keep their buffers in the group, which
//     closes its connections when it fails.
//   - Teardown is explicit: call Close() on every rank before destroying a
//     healthy group or exiting. A rank that exits right after the last
//     collective can reset (TCP RST) a peer still finishing it -- observed
//     with halving-doubling on 8 ranks as "Connection closed by peer".
//   - Zero-byte contributions and empty collectives work (they are decided
//     from the agreed sizes, so all ranks skip the same transfers).
//
// Create() sets SIGPIPE to ignored if it still has its default action:
// otherwise a write to a dead peer kills the surviving process.
//
// Not thread-safe: one thread drives a group (collectives must be issued
// in the same order on every rank anyway).
#ifndef GRADWIRE_TRANSPORT_GLOO_GROUP_H_
#define GRADWIRE_TRANSPORT_GLOO_GROUP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/transport/agreement.h"
#include "gradwire/transport/bounded_block.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_fwd.h"
#include "gradwire/transport/receive_window.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gradwire/transport/transfer_stats.h"

namespace gradwire {
namespace transport {

struct GroupOptions {
  // Numeric address to listen on and advertise (see ResolveBindAddress).
  std::string bind_address = "127.0.0.1";
  // Deadline of each collective, and of TCP connect during rendezvous.
  absl::Duration timeout = absl::Seconds(30);
  // Largest contribution one rank may make to an allgatherv; larger sizes
  // are refused on every rank before any receive is posted.
  uint64_t max_bytes_per_rank = uint64_t{1} << 31;
  // Groups of at most this many ranks gather allgatherv blocks of at most
  // direct_allgatherv_max_block_bytes directly: each rank sends its block
  // to every peer at once, one message hop where the ring
  // (ring_allgather.h) takes P - 1 in sequence; Allgather follows the same
  // rule. Larger payloads take the ring: its one flow into each
  // receiver uses a rate-limited link fully, where P - 1 flows converging
  // on one receiver did not (64 MiB blocks, 4 ranks, 1 Gbit/s tbf: 93 % of
  // the link by ring, 65 % direct). 0: always the ring. (The agreement
  // round is direct in groups of every size: its blocks are a few dozen
  // bytes, and a direct round knows which ranks arrived.)
  int direct_allgather_max_ranks = 16;
  uint64_t direct_allgatherv_max_block_bytes = 256 << 10;
  // How many peers send into one rank at once in the direct allgatherv and
  // in SparseCollectives::AlltoallvBounded (receive_window.h: against TCP
  // incast; at least (P - 1) / 8 in larger groups). 0: every peer at once. The agreement round
  // never waits for a window: its blocks are a few dozen bytes.
  int receive_window = ReceiveWindow::kDefault;
  // Added to the nice value of Gloo's TCP event-loop thread (0..19; the
  // thread that reads every socket of the group's device). Gloo's loop
  // try-locks a pair before handling its epoll event and, failing,
  // returns to a level-triggered epoll_wait that fires again at once:
  // while a thread posting a send or receive holds that pair's lock, the
  // loop spins. With more runnable threads than cores (ranks of emulated
  // hosts sharing a machine) the holder is often descheduled, and the spin
  // takes a core from it (4 ranks on 2 cores: ~24K failed try-locks per
  // second per rank). A positive value lets the spinning loop yield to
  // the holder. It also lets any other busy thread of the machine delay
  // network progress, so 0 (leave the loop as created) is the default;
  // a machine shared by ranks of one job is where it pays.
  int event_loop_nice = 0;
  // Largest segment of the sealed collectives (SealedAllreduceSum and
  // friends; sealed_ring.h): a multiple of 4, at least 64. Must be the same
  // on every rank (the agreement round checks). Smaller segments fill the
  // ring's pipeline sooner; larger ones cost fewer messages (each costs a
  // few dozen microseconds of CPU in Gloo and the kernel). 1 MiB, Gloo's
  // own ring segment (2 ranks on loopback, dense ResNet-50: 256 KiB ~98 ms
  // of process CPU per step, 1 MiB ~80 ms, 4 MiB ~70 ms).
  uint64_t sealed_segment_bytes = 1 << 20;
};

enum class AllreduceAlgorithm {
  kRing,             // bandwidth-optimal, 2(P-1) steps; any size
  kHalvingDoubling,  // log2(P) steps; buffers registered once per tensor
};

class GlooGroup {
 public:
  // Bytes per rank an Allgather carries inside its agreement round.
  static constexpr size_t kInlineAllgatherBytes = CallDescriptor::kPayloadBytes;

  // Rendezvous: rank `rank` of `size` publishes its address in `store` and
  // connects to every other rank. `store` should be scoped to this group
  // (e.g. store->Scoped("world")); re-creating a group after a failure
  // needs a fresh scope so stale addresses are never read.
  static absl::StatusOr<std::unique_ptr<GlooGroup>> Create(int rank, int size,
                                                           std::shared_ptr<RendezvousStore> store,
                                                           const GroupOptions& options);

  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank numbers in the top-level group, indexed by rank in this group
  // (identity for a top-level group); errors name ranks by these numbers.
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // OK, or the failure that poisoned the group.
  absl::Status health() const;

  // all[i] = value of rank i. `all` has size() elements.
  absl::Status AllgatherU64(uint64_t value, absl::Span<uint64_t> all);

  // OK iff every rank passes the same `value` (a fingerprint of settings
  // that must agree, e.g. a codec spec); otherwise, on every rank,
  // InvalidArgument "collective mismatch in <what>: ..." naming the ranks
  // on each side. Leaves the group usable.
  absl::Status ExpectSame(uint64_t value, absl::string_view what);

  // Gathers every rank's bytes in rank order into `out`. `sizes` is the
  // table every rank agreed on (from AllgatherU64): sizes[rank()] must be
  // mine.size() and `out` must hold their sum. Every size is checked
  // against max_bytes_per_rank and the tables compared across ranks before
  // any receive is posted.
  absl::Status Allgatherv(absl::Span<const uint8_t> mine, absl::Span<const uint64_t> sizes,
                          absl::Span<uint8_t> out);

  // Allgatherv without its agreement round, for a caller whose `sizes`
  // table is the result of this group's previous collective (an Allgather
  // of per-rank descriptors that every rank checked the same way), so it
  // is identical everywhere by construction: one round of P-1 messages
  // less per call. Every rank must call it next, with that table. The
  // local checks still run, and the cap is still enforced identically on
  // every rank; a table that fails the local checks is a caller bug and
  // poisons the group (peers may already be waiting for this rank).
  absl::Status AllgathervOfGatheredTable(absl::Span<const uint8_t> mine,
                                         absl::Span<const uint64_t> sizes, absl::Span<uint8_t> out);

  // Allgatherv of self-delimiting blocks (bounded_block.h) under a
  // capacity every rank already agreed on, with no agreement round and no
  // size table: one round of P-1 messages (direct, or P-1 ring hops; the
  // same choice as Allgatherv's for blocks of `capacity` bytes). For
  // callers that exchange blocks of varying size under a bound they
  // settled once (SparseAllgather's frames after a bucket's first
  // exchange). Every rank must call it next with the same capacity: a
  // block longer than a peer's capacity would kill that peer's process in
  // Gloo, which is why the capacity must come from an earlier collective.
  //
  // `block`: this rank's block, kBoundedHeaderBytes <= block.size() <=
  // capacity <= max_bytes_per_rank; the call writes its length into the
  // first kBoundedHeaderBytes bytes. `out`: size() * capacity bytes; rank
  // r's block lands at out[r * capacity], and lengths[r] (size() entries)
  // is its length, header included. Bad local arguments poison the group
  // (the peers are already sending). A received header outside
  // [kBoundedHeaderBytes, capacity] fails the call with DataLoss naming
  // the rank, and poisons the group.
  absl::Status AllgathervBounded(absl::Span<uint8_t> block, uint64_t capacity,
                                 absl::Span<uint8_t> out, absl::Span<uint64_t> lengths);

  // Convenience: exchanges sizes, checks them against `max_bytes_per_rank`
  // (and the group cap), then gathers. `out` is resized to the total,
  // `sizes` to size().
  absl::Status AllgathervBytes(absl::Span<const uint8_t> mine, uint64_t max_bytes_per_rank,
                               std::vector<uint8_t>* out, std::vector<uint64_t>* sizes);

  // Equal-size allgather: out = size() * mine.size() bytes, rank order.
  // Up to kInlineAllgatherBytes per rank ride in the agreement round (one
  // round of messages instead of two); larger blocks go direct or by ring
  // as Allgatherv's do.
  absl::Status Allgather(absl::Span<const uint8_t> mine, absl::Span<uint8_t> out);

  // In place: data = elementwise sum over ranks. Every rank passes the
  // same number of elements. kRing is sealed_ring.h's ring without an
  // authenticator (its fixed summation order, the same bits on every
  // rank); kHalvingDoubling is Gloo's.
  absl::Status AllreduceSum(absl::Span<float> data, AllreduceAlgorithm algorithm);

  // Reduce-scatter of the sum: rank r receives the elements
  // [offset_r, offset_r + counts[r]) of the summed vector, where offset_r
  // is the sum of counts before r, written to data[0, counts[r]). The rest
  // of `data` is scratch. counts (same on every rank) must sum to
  // data.size(). Uses Gloo's halving-doubling reduce-scatter.
  absl::Status ReduceScatterSum(absl::Span<float> data, absl::Span<const uint64_t> counts);

  // The sealed collectives (sealed_ring.h): a ring in which every chunk
  // on the wire carries a tag from `auth`, bound to `scope`, this group's
  // collective number, the sealing rank and the chunk's place in the ring.
  // A chunk that fails to verify fails the call with Unauthenticated naming
  // the rank it came from, and poisons the group. The sums are in the fixed
  // order sealed_ring.h gives, bit-identical on every rank. Every rank
  // passes the same lengths, counts, scope and trailer size.
  //
  // In place: data = elementwise sum over ranks.
  absl::Status SealedAllreduceSum(absl::Span<float> data, const ChunkAuthenticator& auth,
                                  const ChunkScope& scope);
  // Rank r's chunk, the counts[r] elements after the counts before it,
  // becomes the sum over ranks of that chunk; the rest of `data` is left
  // as it was. counts (one per rank) must sum to data.size().
  absl::Status SealedReduceScatterSum(absl::Span<float> data, absl::Span<const uint64_t> counts,
                                      const ChunkAuthenticator& auth, const ChunkScope& scope);
  // Every rank's chunk r (laid out as above) is copied into every rank's
  // `data`; rank r brings its own, authenticated by it.
  absl::Status SealedAllgather(absl::Span<float> data, absl::Span<const uint64_t> counts,
                               const ChunkAuthenticator& auth, const ChunkScope& scope);

  absl::Status Barrier();

  // Collective orderly shutdown: a barrier, then the connections are
  // closed and the group is unusable (FailedPrecondition). Call it on
  // every rank before destroying a healthy group or exiting: a rank that
  // closes its sockets while a peer is still finishing the last collective
  // can make that peer fail with Unavailable. The barrier guarantees every
  // rank finished every earlier collective (and Gloo consumed its last
  // messages) before any socket closes. Destroying a group without Close()
  // never blocks.
  absl::Status Close();

  // Collective: ranks passing the same `color` form a new group, ordered
  // by rank, with its own Gloo context over the same device and its own
  // store scope. Split by node id gives the intra-node group; split by
  // local rank the cross-node group of the hierarchical exchange.
  absl::StatusOr<std::unique_ptr<GlooGroup>> Split(uint32_t color);

  // Counters.
  const CallStats& last_call() const { return last_call_; }
  const TransferTotals& totals() const { return totals_; }

 private:
  // The log-round collectives of sparse exchanges (sparse_collectives.h)
  // use the context, deadline, tag counter and poisoning directly.
  friend class SparseCollectives;

  GlooGroup(int rank, int size, std::shared_ptr<RendezvousStore> store, const GroupOptions& options,
            std::shared_ptr<gloo::transport::Device> device, std::shared_ptr<gloo::Context> context,
            std::vector<int> world_ranks);

  // Runs one collective: FailedPrecondition if the group is poisoned,
  // else `body`, timed and booked in last_call()/totals() whatever it
  // returns. `agreement_round`: the call exchanges descriptors first (all
  // but AllgathervOfGatheredTable do).
  absl::Status Run(uint64_t op, bool agreement_round, absl::FunctionRef<absl::Status()> body);
  // Adds to the bytes of the call in progress.
  void AddBytes(uint64_t sent, uint64_t received) {
    call_.bytes_sent += sent;
    call_.bytes_received += received;
  }

  // The agreement round: every rank's descriptor into `all`, or the
  // failure (which poisons the group), naming the ranks that did not
  // arrive.
  absl::Status Agree(const CallDescriptor& mine, std::vector<CallDescriptor>* all);
  // DirectAllgatherv on this group's context; a failure poisons the group
  // and names the ranks whose blocks did not arrive.
  absl::Status DirectGather(const uint8_t* mine, absl::Span<const uint64_t> sizes, uint8_t* out,
                            int window, const std::string& what);
  // The ring allreduces' chunks of n elements, as even as they come: the
  // first n % P ranks own one more.
  std::vector<uint64_t> EvenChunks(uint64_t n) const {
    std::vector<uint64_t> counts(size_, n / size_);
    for (uint64_t r = 0; r < n % size_; ++r) ++counts[r];
    return counts;
  }
  // RingAllgatherv on this group's context; a failure poisons the group
  // (TransferFailed).
  absl::Status RingGather(const uint8_t* mine, absl::Span<const uint64_t> sizes, uint8_t* out,
                          const char* what);
  // The bounded forms of the two gathers (AllgathervBounded).
  absl::Status DirectGatherBounded(const uint8_t* mine, uint64_t mine_bytes,
                                   absl::Span<const uint64_t> capacities, uint8_t* out,
                                   const std::string& what);
  absl::Status RingGatherBounded(const uint8_t* mine, uint64_t mine_bytes,
                                 absl::Span<const uint64_t> capacities, uint8_t* out,
                                 const char* what);
  bool UseDirectAllgather() const {
    return size_ > 1 && size_ <= options_.direct_allgather_max_ranks;
  }
  bool UseDirectAllgatherv(absl::Span<const uint64_t> sizes) const {
    if (!UseDirectAllgather()) return false;
    for (uint64_t b : sizes) {
      if (b > options_.direct_allgatherv_max_block_bytes) return false;
    }
    return true;
  }
  // A Gloo collective (CallGloo status `s`) after an agreement round every
  // rank passed: a deadline error says whom a ring was waiting on; any
  // failure poisons the group.
  absl::Status TransferFailed(absl::Status s, bool ring);
  absl::Status AllgathervImpl(absl::Span<const uint8_t> mine, absl::Span<const uint64_t> sizes,
                              absl::Span<uint8_t> out, bool agree);
  // The three sealed collectives: op kSealedAllreduce, kSealedReduceScatter
  // or kSealedAllgather.
  absl::Status SealedImpl(uint64_t op, absl::Span<float> data, absl::Span<const uint64_t> counts,
                          const ChunkAuthenticator& auth, const ChunkScope& scope);
  absl::Status Fail(absl::Status status);
  absl::Status CheckUsable() const;
  uint32_t NextTag() { return ++tag_; }

  const int rank_;
  const int size_;
  std::shared_ptr<RendezvousStore> store_;
  const GroupOptions options_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;  // null when size_ == 1
  std::vector<int> world_ranks_;

  absl::Status poison_;
  uint32_t tag_ = 0;
  uint32_t splits_ = 0;
  CallStats call_;             // the call in progress (Run)
  absl::Duration agree_time_;  // of the call in progress (Agree adds, Run books)
  CallStats last_call_;
  TransferTotals totals_;

  // Halving-doubling algorithms bind (register) their buffers when built,
  // so they are cached per (tensor, length) and reused; all ranks agree on
  // reuse in the agreement round so slot numbers stay in lockstep.
  using CacheKey = std::pair<const void*, uint64_t>;
  std::map<CacheKey, std::unique_ptr<gloo::Algorithm>> allreduce_hd_;
  std::map<std::pair<CacheKey, uint64_t>, std::unique_ptr<gloo::Algorithm>> reduce_scatter_;
  std::vector<float> ring_scratch_;  // the sealed ring's segments in flight
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_GLOO_GROUP_H_
