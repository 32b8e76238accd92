// The agreement round every GlooGroup collective starts with, minus the
// network: the record each rank contributes (CallDescriptor) and its wire
// layout, and the verdicts drawn from every rank's record or from its
// absence. Verdicts name ranks by their world numbers and are worded from
// data every rank holds alike, so every rank reports the same culprits:
//   - CheckSame: "collective mismatch ..." when ranks disagree on the
//     operation, its shared arguments, or one passed bad arguments;
//   - NameMissing: a failed exchange re-worded to say which ranks did not
//     arrive (and which did), e.g. "rank 2 did not arrive within 30s
//     (ranks [0, 1, 3] did)".
// gloo_group.cc runs the round (see GlooGroup::Agree).
#ifndef GRADWIRE_TRANSPORT_AGREEMENT_H_
#define GRADWIRE_TRANSPORT_AGREEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace gradwire {
namespace transport {

// The collectives, as descriptors and errors name them.
enum CollectiveOp : uint64_t {
  kAllgatherU64 = 1,
  kAllgatherv,
  kAllgather,
  kAllreduceRing,
  kAllreduceHalvingDoubling,
  kReduceScatter,
  kBarrier,
  kSplit,
  kExpectSame,
  kSealedAllreduce,
  kSealedReduceScatter,
  kSealedAllgather,
  kAllgathervBounded,
};
// "allgatherv", "allreduce_ring", ...; "unknown" for other values.
const char* OpName(uint64_t op);

// Flags in CallDescriptor::value, for ops whose value is not data.
// kArgsBad: "my arguments were bad": every rank then fails together
// instead of the others waiting for a transfer the bad rank never starts.
// kCached: "I hold a built algorithm for this tensor": reused only if every
// rank does, so all ranks build (and take context slots) in lockstep.
inline constexpr uint64_t kArgsBad = 1;
inline constexpr uint64_t kCached = 2;

// The record every rank contributes to the agreement round. On the wire
// always kEncodedBytes (four little-endian u64, then the payload), so the
// round itself can never mismatch in size. An Allgather of at most
// kPayloadBytes per rank travels in `payload`: one round instead of two,
// which matters for the small per-bucket tables of the compressed
// exchange.
struct CallDescriptor {
  static constexpr size_t kPayloadBytes = 48;
  static constexpr size_t kEncodedBytes = 4 * 8 + kPayloadBytes;

  uint64_t op = 0;
  uint64_t count = 0;   // elements or bytes this rank passes
  uint64_t shared = 0;  // hash of arguments that must agree across ranks
  uint64_t value = 0;   // op-specific: the u64 being gathered, flags, ...
  uint8_t payload[kPayloadBytes] = {};

  // Writes kEncodedBytes at `out`.
  void EncodeTo(uint8_t* out) const;
  // Reads kEncodedBytes at `in`.
  static CallDescriptor DecodeFrom(const uint8_t* in);
};

// Checksum64 of a u64 table's little-endian bytes: the round compares
// hashes of arguments that must be identical on every rank (size tables,
// counts).
uint64_t HashTable(absl::Span<const uint64_t> table);

// "rank 3" or "ranks [0, 2, 5]".
std::string NameRanks(absl::Span<const int> ranks);
// "rank 3 passes" / "ranks [0, 1] pass".
std::string RanksVerb(absl::Span<const int> ranks, const char* one, const char* many);

// Compares every rank's descriptor (`all`, indexed by group rank;
// `world_ranks` names them); OK or InvalidArgument "collective mismatch
// ..." naming the ranks on each side. `value_is_flags`: the value field
// carries kArgsBad / kCached (not data, as in AllgatherU64, Split and
// ExpectSame).
absl::Status CheckSame(absl::Span<const CallDescriptor> all, absl::Span<const int> world_ranks,
                       const char* op, bool value_is_flags);

// CheckSame for ops whose `shared` field is the length each rank passes
// (its `count`): a disagreement on it is worded as the lengths, in
// `unit`s ("rank 2 passes 50 elements; ranks [0, 1] pass 100 elements").
absl::Status CheckSameLength(absl::Span<const CallDescriptor> all,
                             absl::Span<const int> world_ranks, const char* op, const char* unit);

// A collective's local check of a per-rank count table (reduce-scatters,
// sealed collectives): OK iff `counts` has `size` entries summing to `n`;
// else InvalidArgument "<op>: 3 counts summing to 90 for 4 ranks and 100
// elements".
absl::Status CheckCountTable(const char* op, absl::Span<const uint64_t> counts, int size,
                             uint64_t n);

// What a failed exchange knows of each rank's contribution.
enum class Arrival : uint8_t {
  kArrived,  // it came (or is this rank's own)
  kMissing,  // it did not come
  kUnknown,  // nothing to tell (zero-byte blocks both ways)
};

// `failure` (from the exchange `what`, which waited at most `timeout`)
// re-worded to name the missing ranks by `world_ranks`:
//   DeadlineExceeded: "<what>: rank 2 did not arrive within 30s (ranks
//     [0, 1, 3] did)", Gloo's own words dropped (they name no rank);
//   other codes: "<what>: rank 2 did not arrive (ranks [0, 1, 3] did):
//     <failure's message>".
// Unknown ranks are listed as such. The code is kept. Without a missing
// rank (say, a send failed after every block arrived) `failure` is
// returned as it is.
absl::Status NameMissing(const absl::Status& failure, absl::string_view what,
                         absl::Span<const Arrival> arrivals, absl::Span<const int> world_ranks,
                         absl::Duration timeout);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_AGREEMENT_H_
