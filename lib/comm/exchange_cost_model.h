// The cost model that picks, per bucket, how to average it: a dense ring
// allreduce, the sparse allgather (sparse_allgather.h), the sparse
// allreduce (sparse_allreduce.h) or, for fp16 and bf16, the cast
// allreduce (cast_allreduce.h). One place: the Communicator asks it per
// bucket, the benchmarks print its predictions beside their measurements.
//
// Per rank and per bucket of n fp32 elements, k = spec.SelectedCount(n)
// entries of x index bytes (raw u32: 4; delta varint: expected LEB128
// length of the gaps at density k/n; random-k: 0) and w value bytes:
//
//   dense ring        bytes 2 (P-1)/P * 4n              rounds 1 + 2 (P-1)
//   sparse allgather  bytes (P-1) * (F + k (x + w))      rounds 1 + D (P <= 16,
//                     F: frame header, checksum, MAC     direct), else
//                                                        1 + (P-1) (ring)
//   sparse allreduce  bytes (P-1)/P * (k (x + w)         rounds A + D + R H
//                     + (k + B) (x + 4))                 + ceil(log2 P)
//                     + 2 (P-1) G + agreement + R * 1 KB A: agreement, 1
//                     G: region frame overhead           (P <= 16), else L
//                     B: band (<= 256)                   H: a histogram round
//                                                        (L; 2 log2 P from 8)
//                                                        R: selection rounds
//                                                        (topk 2-3, randomk 0)
//                                                        D: an exchange with
//                                                        every peer through a
//                                                        receive window of
//                                                        max(4, (P-1)/8):
//                                                        ceil((P-1)/4) steps,
//                                                        8 from P = 33
//
//   cast allreduce    bytes (P-1)/P * (2n + 2n)          rounds A + D + V
//   (fp16, bf16)      + (P-1) (G + 80) + agreement       + P (the sealed
//                     + V * 4P                           ring allgather)
//                                                        V: the verdict,
//                                                        recursive doubling
//
// Codecs that send every element (fp16, bf16, qsgd, sign) have no sparse
// allreduce; their allgather frame is F + their payload: 2n (casts),
// ceil(n b / 8) + 4 ceil(n / B) (QSGD, b bits, B per scale; sign: b = 1).
// For them the choice is by payload bytes alone. The casts: the cast
// allreduce where its (P-1)/P 4n is below the allgather's (P-1) 2n, i.e.
// from P = 3 (it is always half the ring's (P-1)/P 8n). The others: the
// ring where P - 1 payloads are at least the ring's 2 (P-1)/P 4n, i.e.
// payload >= 8n/P (8-bit QSGD from P = 8, 4-bit from P = 16, sign from
// P = 61 at B = 512).
//
// each bounded by what the dense layouts allow (a region frame is never
// larger than its region in dense form, so the sparse allreduce never
// moves more than a dense ring plus framing: SparCML's rule). Time is
// bytes / bandwidth + rounds * round latency + compute, where compute is
// one core's CPU: encode over n, the entries' work (the allgather decodes
// P k at the decode rate; the sparse allreduce handles each entry of its k
// at its own rate, reduced_entries_per_second: splitting, the owner's
// sums, selection, survivors, give-back), the dense passes over the bucket (zeroing, scans,
// division) and the messages a step sends beyond the one a measured round
// carries (a direct step with P - 1 peers sends P - 1): each costs CPU in
// the transport (system calls, the event loop's wake-ups, copies), and
// every byte sent or received its seconds_per_byte. Ranks
// that share cores take longer: the compute is divided by the model's
// cores_per_rank (at most 1). The choice is the smallest predicted time.
//
// Messages per rank (each also received):
//   dense ring        (P-1) agreement + 2 (P-1)
//   sparse allgather  (P-1) agreement + (P-1)
//   sparse allreduce  agreement (P-1 direct, else the doubling steps)
//                     + (P-1) + R * (2 (P-1) direct, else H's steps)
//                     + ceil(log2 P)
//   cast allreduce    agreement (as above) + (P-1) + V + (P-1) agreement
//                     + (P-1)
#ifndef GRADWIRE_LIB_COMM_EXCHANGE_COST_MODEL_H_
#define GRADWIRE_LIB_COMM_EXCHANGE_COST_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

// What the model knows of the machine. Defaults: a 10 Gbit/s link with
// 50 us per message step, this project's CPU codecs, 10 us of CPU per
// extra message (system calls and wake-ups; PREDICTED for a cloud host:
// this 2-core VM measures 100-200 us of process CPU per message), no CPU
// for the bytes themselves (measured: 1-2 ns a byte on this VM's emulated
// links; a NIC's offloads take much of it) and a core for every rank.
struct ExchangeModel {
  double bytes_per_second = 1.25e9;          // one rank's link, each way
  double seconds_per_round = 50e-6;          // one message step
  double encoded_elements_per_second = 4e8;  // error feedback + selection
  double decoded_entries_per_second = 2e8;   // decode-accumulate of entries
  // The sparse allreduce's CPU per entry of a rank's k, as a rate: about
  // 11 decodes of an entry at 1 % density, whatever the bucket's density
  // (the decode itself gets cheaper per entry as entries crowd into
  // shared cache lines; the allreduce's splitting, sums and selection do
  // not). Measured: 1/11 of the codec's decode rate at its density where
  // that is at most 1 %, else of the same method's at 1 %.
  double reduced_entries_per_second = 2e8 / 11;
  double streamed_elements_per_second = 1e9;  // dense passes: zero, scan, divide
  double seconds_per_message = 10e-6;         // CPU of one more message sent and received
  double seconds_per_byte = 0;                // CPU of a byte sent or received (kernel, copies)
  // The cores each rank's CPU work gets: 0.5 for four ranks on a 2-core
  // machine; above 1 counts as 1 (the codecs use one core). The CPU times
  // above are divided by it. Measured: host_cores.h.
  double cores_per_rank = 1;
};

// One figure of the model: its name, where it lives, its range and how
// the ranks agree on it (AgreeExchangeModel). exchange_model_spec.h gives
// the figures' text form from the same table.
struct ExchangeModelField {
  // How the ranks' figures become one: the least (a rate, the cores: the
  // slowest rank's), the most (a time: the slowest rank's) or the mean (the
  // CPU of a message or of a byte, which the kernel charges to whichever
  // rank runs when it does; the machine pays the sum).
  enum class Agreement { kLeast, kMost, kMean };
  const char* name;               // the member's name
  double ExchangeModel::*member;  // where it lives
  bool is_time;                   // seconds (>= 0); else a rate or cores (> 0)
  Agreement agreement;
};

// The nine figures, in the struct's order.
absl::Span<const ExchangeModelField> ExchangeModelFields();

enum class ExchangeKind { kDenseRing, kSparseAllgather, kSparseAllreduce, kCastAllreduce };
// Every kind, in the enum's order.
inline constexpr ExchangeKind kExchangeKinds[] = {
    ExchangeKind::kDenseRing, ExchangeKind::kSparseAllgather, ExchangeKind::kSparseAllreduce,
    ExchangeKind::kCastAllreduce};
const char* ExchangeKindName(ExchangeKind kind);
// The kind ExchangeKindName gives `name`; nullopt for any other name.
std::optional<ExchangeKind> ExchangeKindFromName(absl::string_view name);

struct ExchangeCost {
  double bytes_sent = 0;      // per rank
  double bytes_received = 0;  // per rank
  double rounds = 0;          // message steps in sequence
  double messages = 0;        // messages sent per rank (as many received)
  double wire_seconds = 0;
  double compute_seconds = 0;
  double seconds() const { return wire_seconds + compute_seconds; }
  std::string ToString() const;
};

// Predicted cost of averaging n elements over P ranks with `kind` (the
// compressed kinds with `spec`; kSparseAllreduce needs a sparse method,
// kCastAllreduce fp16 or bf16).
ExchangeCost EstimateExchange(ExchangeKind kind, int ranks, uint64_t elements,
                              const CompressionSpec& spec, const ExchangeModel& model);

// The cheapest of the ring and the sparse exchanges for a sparse `spec`
// (ties: the simpler one); for fp16 and bf16 the cast allreduce from
// P = 3, else the allgather; for QSGD and sign the ring where their
// payload is at least 8n/P bytes, else the allgather; kDenseRing for
// "none".
ExchangeKind ChooseExchange(int ranks, uint64_t elements, const CompressionSpec& spec,
                            const ExchangeModel& model);

// Whether a hierarchical communicator of `nodes` nodes x `local` ranks
// averages a dense buffer of `elements` in two levels
// (Communicator::DenseHierarchical: the node's reduce-scatter, `local`
// rings across the nodes on 1/local shards sharing the link, the node's
// verdict and allgather) rather than by the world's ring: where the model
// predicts it faster. The model knows one link, so the node stages are
// priced as if they crossed it (on a real node they are faster): the rule
// leans to the world ring. By rounds alone, 2L + 2N against 2NL - 1: the
// world ring at 2 x 2, two levels from about 2 x 4 and at every scale
// where the world ring's 2(P - 1) steps dominate (256 x 8: 528 rounds
// against 4,095).
bool DenseTwoLevel(int nodes, int local, uint64_t elements, const ExchangeModel& model);

// Whether a dense buffer of `dense_elements` rides in the frames of a
// sparse allgather (its dense section) rather than taking a dense ring of
// its own: where the model predicts the bytes it adds to what each rank
// receives, (P - 1) x 4 x dense_elements at the link's rate, no slower
// than the ring's exchange of it (agreement round, 2(P - 1) steps, its
// bytes and passes). GradientExchanger's dense tail
// (Communicator::DenseTailRides). Small P and small parts ride: with the
// default model, ResNet-50's 67.6K dense elements ride at P = 4 and take
// the ring from P = 8.
bool DenseRidesAllgather(int ranks, uint64_t dense_elements, const ExchangeModel& model);

// What a dense section of `dense_elements` adds to a sparse allgather:
// every rank receives every other rank's, (P - 1) x 4 bytes an element at
// the link's rate. DenseRidesAllgather and Communicator::DenseRides price
// the ride with it.
double DenseSectionSeconds(int ranks, uint64_t dense_elements, const ExchangeModel& model);

// The rule ChooseExchange applies to `spec`, in words for reports: the
// smallest predicted time (sparse specs), or bytes alone (the casts,
// QSGD and sign, whose predicted times are reported but do not choose).
const char* ExchangeChoiceRule(const CompressionSpec& spec);

// Collective: the model every rank of `group` will use, identical on all
// (the choice must be, or ranks would start different collectives). Each
// field is agreed as its ExchangeModelField says: the slowest rank's,
// exactly as that rank gave it, or the mean over ranks (the CPU of a
// message and of a byte). A rate that is not positive and finite counts
// as 1e12 (fast: it never decides), a time that is negative or not finite
// as 1e-12. With measure = true the link and `codec`'s
// speed are measured first (a few round trips; an allgather of about 1 MB
// into every rank six times, MeasuredLinkRate; a 1M-element encode and its
// decode, in this thread's CPU time, median of five, and for a sparse
// codec denser than 1 % the decode of the same method's frame at 1 %
// (reduced_entries_per_second); the dense passes
// likewise; the CPU of a message as the process's CPU time over the
// round-latency trips, per message; the CPU of a byte as the process's
// CPU time over the timed allgathers (the median) less their messages',
// per byte sent and received; the cores a rank gets from an
// allgather of the ranks' RankCores, host_cores.h); otherwise `mine` is
// taken as given.
absl::StatusOr<ExchangeModel> AgreeExchangeModel(transport::GlooGroup& group,
                                                 const ExchangeModel& mine, bool measure,
                                                 const Codec* codec);

// The link rate that transfers of `bytes` into a rank, timed as
// `transfer_seconds` (wall clock, in order), show: bytes over the median
// of all but the first, less `latency_seconds` (the transfer's message
// steps); 0 for fewer than two. The first is a warm-up: the buffers' pages
// and TCP's windows are fresh. Four ranks on a 2-core VM's loopback, 1 MB:
// the first took 3.7-9.6 ms, the next ones 1.4-2.5 ms; timed alone, as it
// was, it once gave 38 MB/s for a loopback whose exchanges then moved
// 450, and the model picked an exchange 2.9 times slower
// (docs/communicator.md). The median, as a rank descheduled on a shared
// core can stretch any one of them (two of twelve took 12 and 20 ms).
double MeasuredLinkRate(absl::Span<const double> transfer_seconds, double bytes,
                        double latency_seconds);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_EXCHANGE_COST_MODEL_H_
