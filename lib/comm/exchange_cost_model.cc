#include "gradwire/lib/comm/exchange_cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/cpu_time.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/codec/session_frame_auth.h"
#include "gradwire/lib/codec/wire_format.h"
#include "gradwire/lib/comm/codec_timing.h"
#include "gradwire/lib/comm/host_cores.h"
#include "gradwire/lib/comm/region_frame.h"
#include "gradwire/lib/comm/sparse_allgather.h"
#include "gradwire/transport/receive_window.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

using transport::SparseCollectives;

// Framing per message, in bytes (the Communicator signs with its
// session's GMAC).
constexpr double kCodecFrameOverhead =
    kFrameHeaderBytes + kFrameChecksumBytes + SessionFrameAuth::kTrailerBytes;
constexpr double kRegionFrameOverhead =
    kRegionHeaderBytes + SessionFrameAuth::kTrailerBytes + SparseCollectives::kLengthBytes;
constexpr double kAgreementBytes = 80;   // GlooGroup's descriptor
constexpr double kHistogramBytes = 512;  // 128 u32 bins
constexpr double kPlanBytes = 80;        // the cast allreduce's agreement
constexpr double kSparsePlanBytes = 96;  // the sparse allreduce's: min and max of 6 u64
constexpr double kBand = 128;            // a typical band (at most 256)
constexpr int kDirectMaxRanks = 16;      // GroupOptions defaults
constexpr double kDirectMaxBlock = 256 << 10;

// CPU of the sparse allreduce per entry of this rank's k, in decodes of
// an entry: its own indices read back, the split by region, the owner's
// verify, parse and sum of every contribution, the candidates' keys and
// the selection, the survivors' frames both ways, the write of the
// average and the give-back of what did not survive. Measured against
// the allgather's P decodes an entry (the slope of process CPU per step
// over k): 13.1 for top-k at 0.1-5 % and 13.6 for random-k at 0.5-5 %,
// P = 4, n = 63M; 11.0 and 14.9 for top-k on one 16.8M bucket at P = 4
// and 8, the same ns an entry at both
// (docs/results/2026-12-06-allreduce-entry-cost.md). It was 3 (the
// decode-accumulates alone), which had the allreduce chosen at 5 % on 4
// ranks where it took 3x the allgather's step. Then 13, until the owner's
// sums went by a bitmap of the touched entries and the give-back went
// straight into the residual: on a Zen 3 guest the same forced pairs gave
// 16.9 decodes an entry before and 14.0 after (the slope 69.1 -> 57.4 ns),
// so 13 x 14.0 / 16.9, and the per-element term lost the zeroing and scan
// of the region's sums (the intercept fell by 20 ms at n = 63M, P = 4;
// docs/results/2026-12-06-allreduce-bitmap.md).
// Those slopes are in decodes at about 1 % density: the allreduce's
// entry is ~57-70 ns whatever the density, while a decode gets cheaper
// per entry as entries crowd into shared cache lines (the measured rate
// 2.5x from 1 % to 10 %: the run needed 11, 22 and 27 of the codec's own
// decodes an entry at 1, 5 and 10 %, and its CPU was under-predicted
// 1.7x at 10 %; docs/results/2026-12-06-measured-link.md). So the model
// prices it as its own rate, reduced_entries_per_second, measured as
// 1/11 of the decode rate at kReferenceDensity.
constexpr double kSparseAllreduceEntryDecodes = 11;
constexpr double kReferenceDensity = 0.01;

using Agreement = ExchangeModelField::Agreement;
constexpr ExchangeModelField kFields[] = {
    {"bytes_per_second", &ExchangeModel::bytes_per_second, false, Agreement::kLeast},
    {"seconds_per_round", &ExchangeModel::seconds_per_round, true, Agreement::kMost},
    {"encoded_elements_per_second", &ExchangeModel::encoded_elements_per_second, false,
     Agreement::kLeast},
    {"decoded_entries_per_second", &ExchangeModel::decoded_entries_per_second, false,
     Agreement::kLeast},
    {"reduced_entries_per_second", &ExchangeModel::reduced_entries_per_second, false,
     Agreement::kLeast},
    {"streamed_elements_per_second", &ExchangeModel::streamed_elements_per_second, false,
     Agreement::kLeast},
    {"seconds_per_message", &ExchangeModel::seconds_per_message, true, Agreement::kMean},
    {"seconds_per_byte", &ExchangeModel::seconds_per_byte, true, Agreement::kMean},
    {"cores_per_rank", &ExchangeModel::cores_per_rank, false, Agreement::kLeast}};

// Steps of a recursive-doubling allreduce (folding in a non-power of 2).
// (64-bit: at p >= 2^30 an int's 2 << steps would overflow and the loop
// never end.)
double DoublingSteps(int p) {
  int steps = 0;
  while ((int64_t{2} << steps) <= p) ++steps;
  return steps + ((p & (p - 1)) != 0 ? 2 : 0);
}

double BruckSteps(int p) { return p > 1 ? std::ceil(std::log2(p)) : 0; }

// Message steps of one exchange with every peer (the direct allgatherv,
// AlltoallvBounded): receives go through a window of the default size
// sources or more (transport/receive_window.h: at most 8 waves), each
// completed one letting the next source start, so small messages take one
// step per window's worth of sources.
double DirectSteps(int p) {
  if (p < 2) return 0;
  const size_t window =
      transport::ReceiveWindow::Effective(p - 1, transport::ReceiveWindow::kDefault);
  return std::ceil(static_cast<double>(p - 1) / window);
}

// Steps and bytes per rank of one SparseCollectives::AllreduceU32/U64 of
// a `vector_bytes` vector (sparse_collectives.h): direct (a reduce-scatter
// and an allgather) where the group gathers directly and the vector is
// large enough, else recursive doubling, or halving and doubling.
void SmallAllreduceRound(int p, double vector_bytes, double* steps, double* bytes) {
  if (p <= kDirectMaxRanks && vector_bytes >= SparseCollectives::kHalvingMinBytes) {
    *steps = 2;
    *bytes = 2.0 * (p - 1) / p * vector_bytes;
    return;
  }
  if (!SparseCollectives::UsesHalving(p, vector_bytes)) {
    *steps = DoublingSteps(p);
    *bytes = DoublingSteps(p) * vector_bytes;
    return;
  }
  double p2 = 1;
  while (2 * p2 <= p) p2 *= 2;
  const bool folded = p2 < p;
  *steps = 2 * std::log2(p2) + (folded ? 2 : 0);
  *bytes = 2 * (p2 - 1) / p2 * vector_bytes + (folded ? vector_bytes : 0);
}

// Histogram rounds of a top-k selection among m candidates: the first
// round's bins span 2 octaves (about half of the candidates near the
// threshold fall in one), each later one narrows 128-fold, until a band
// of 256 is left.
double SelectionRounds(double m, double k) {
  if (m <= k) return 1;
  double rounds = 1;
  for (double near = m / 2; near > 256 && rounds < 9; near /= 128) ++rounds;
  return rounds;
}

// Expected bytes of one index: LEB128 of geometric gaps of mean n / k.
double IndexBytes(const CompressionSpec& spec, double n, double k) {
  if (spec.method == Method::kRandomK) return 0;
  if (spec.indices == IndexEncoding::kRawU32) return 4;
  const double mean_gap = k > 0 ? n / k : 1;
  double bytes = 1;
  for (double limit = 128; limit < 1e10; limit *= 128) bytes += std::exp(-limit / mean_gap);
  return bytes;
}

double ValueWidth(const CompressionSpec& spec) { return spec.values == ValueType::kFp32 ? 4 : 2; }

// How a codec that sends every element lays out its payload
// (cast_codec.cc, quantized_codec.cc): `bits` per element, and one fp32
// scale per `bucket` elements (0: no scales).
struct EveryElementLayout {
  double bits;
  double bucket;
};

EveryElementLayout LayoutOf(const CompressionSpec& spec) {
  switch (spec.method) {
    case Method::kFp16:
    case Method::kBf16:
      return {16, 0};
    case Method::kQsgd:
    case Method::kSign:
      return {spec.method == Method::kSign ? 1.0 : static_cast<double>(spec.quant_bits),
              std::max<double>(1, spec.bucket_size)};
    default:
      return {32, 0};
  }
}

// Its payload bytes per element, without rounding up to whole bytes and
// buckets.
double EveryElementRate(const CompressionSpec& spec) {
  const EveryElementLayout l = LayoutOf(spec);
  return l.bits / 8 + (l.bucket > 0 ? 4 / l.bucket : 0);
}

// Its payload for n elements: the frame's sections.
double EveryElementPayload(const CompressionSpec& spec, double n) {
  const EveryElementLayout l = LayoutOf(spec);
  return std::ceil(n * l.bits / 8) + (l.bucket > 0 ? 4 * std::ceil(n / l.bucket) : 0);
}

}  // namespace

absl::Span<const ExchangeModelField> ExchangeModelFields() { return kFields; }

const char* ExchangeKindName(ExchangeKind kind) {
  static constexpr const char* kNames[] = {"dense_ring", "sparse_allgather", "sparse_allreduce",
                                           "cast_allreduce"};
  const size_t i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

std::optional<ExchangeKind> ExchangeKindFromName(absl::string_view name) {
  for (ExchangeKind kind : kExchangeKinds) {
    if (name == ExchangeKindName(kind)) return kind;
  }
  return std::nullopt;
}

std::string ExchangeCost::ToString() const {
  return absl::StrFormat(
      "%.0f B sent, %.0f B received, %.0f rounds, %.0f messages, %.3f ms wire + %.3f ms cpu",
      bytes_sent, bytes_received, rounds, messages, wire_seconds * 1e3, compute_seconds * 1e3);
}

ExchangeCost EstimateExchange(ExchangeKind kind, int ranks, uint64_t elements,
                              const CompressionSpec& spec, const ExchangeModel& model) {
  ExchangeCost c;
  const double p = std::max(ranks, 1), n = elements;
  const bool sparse = spec.SelectsEntries();
  const double k = sparse ? spec.SelectedCount(elements) : n;
  const double stream = model.streamed_elements_per_second;
  const double encode = n / model.encoded_elements_per_second;
  const bool direct = p <= kDirectMaxRanks;
  switch (kind) {
    case ExchangeKind::kDenseRing:
      c.bytes_sent = c.bytes_received = 2 * (p - 1) / p * 4 * n + (p - 1) * kAgreementBytes;
      // GlooGroup's agreement round is one direct exchange at any P.
      c.rounds = p > 1 ? 1 + 2 * (p - 1) : 0;
      c.messages = 3 * (p - 1);
      c.compute_seconds = 2 * n / stream;
      break;
    case ExchangeKind::kSparseAllgather: {
      const double payload =
          sparse ? k * (IndexBytes(spec, n, k) + ValueWidth(spec)) : EveryElementPayload(spec, n);
      const double frame = kCodecFrameOverhead + payload;
      // A bucket's exchanges after its first: descriptor and frame in one
      // bounded block, one round (sparse_allgather.h); the first one's
      // agreement round is not modelled.
      c.bytes_sent = c.bytes_received = (p - 1) * (frame + SparseAllgather::kBlockPrefixBytes);
      const double gather = direct && frame <= kDirectMaxBlock ? DirectSteps(p) : p - 1;
      c.rounds = p > 1 ? gather : 0;
      c.messages = p - 1;
      c.compute_seconds = encode + p * k / model.decoded_entries_per_second + n / stream;
      break;
    }
    case ExchangeKind::kSparseAllreduce: {
      const double x = IndexBytes(spec, n, k), w = ValueWidth(spec);
      const double share = (p - 1) / p;
      // Region frames never exceed their region in dense form.
      const double contributions = std::min(share * k * (x + w), share * n * w);
      const bool random = spec.method == Method::kRandomK;
      const double band = random ? 0 : std::min(kBand, k);
      const double survivors = std::min(share * (k + band) * (x + 4), share * n * 4);
      const double selection = random ? 0 : SelectionRounds(std::min(n, p * k), k);
      double round_steps = 0, round_bytes = 0;
      SmallAllreduceRound(ranks, kHistogramBytes, &round_steps, &round_bytes);
      // The agreement: one direct allgather round, or recursive doubling.
      const double agree_steps = direct ? 1 : DoublingSteps(p);
      const double agree_bytes =
          direct ? (p - 1) * kAgreementBytes : agree_steps * kSparsePlanBytes;
      c.bytes_sent = c.bytes_received = contributions + survivors +
                                        2 * (p - 1) * kRegionFrameOverhead + agree_bytes +
                                        selection * round_bytes;
      c.rounds = p > 1 ? agree_steps + DirectSteps(p) + selection * round_steps + BruckSteps(p) : 0;
      const double agree_messages = direct ? p - 1 : agree_steps;
      const double round_messages = p <= kDirectMaxRanks ? 2 * (p - 1) : round_steps;
      c.messages =
          p > 1 ? agree_messages + (p - 1) + selection * round_messages + BruckSteps(p) : 0;
      // Dense passes: the average written (n) and, measured beyond the
      // allgather's, about one pass over a region (n / P).
      c.compute_seconds = encode + k / model.reduced_entries_per_second + (n + n / p) / stream;
      break;
    }
    case ExchangeKind::kCastAllreduce: {
      const double share = (p - 1) / p;
      const double agree_steps = direct ? 1 : DoublingSteps(p);
      const double agree_bytes = direct ? (p - 1) * kAgreementBytes : agree_steps * kPlanBytes;
      // The verdict: one u32 per rank (recursive doubling below 64 ranks).
      double verdict_steps = 0, verdict_bytes = 0;
      SmallAllreduceRound(ranks, 4 * p, &verdict_steps, &verdict_bytes);
      c.bytes_sent = c.bytes_received = share * 2 * n + share * 2 * n +
                                        (p - 1) * (kRegionFrameOverhead + kAgreementBytes) +
                                        agree_bytes + verdict_bytes;
      c.rounds = p > 1 ? agree_steps + DirectSteps(ranks) + verdict_steps + p : 0;
      c.messages =
          p > 1 ? (direct ? p - 1 : agree_steps) + (p - 1) + verdict_steps + 2 * (p - 1) : 0;
      // The owner decodes P values per element of its region: n in all;
      // the region frames are copied once, the owner rounds its region
      // and every rank decodes the n rounded averages.
      c.compute_seconds = encode + n / model.decoded_entries_per_second + (n + 2 * n / p) / stream;
      break;
    }
  }
  // A measured round carries one message each way; the others of its
  // step cost their CPU.
  c.compute_seconds += std::max(0.0, c.messages - c.rounds) * model.seconds_per_message +
                       (c.bytes_sent + c.bytes_received) * model.seconds_per_byte;
  // Ranks that share cores take as much longer (the codecs use one core).
  c.compute_seconds /= std::min(1.0, model.cores_per_rank);
  c.wire_seconds = std::max(c.bytes_sent, c.bytes_received) / model.bytes_per_second +
                   c.rounds * model.seconds_per_round;
  return c;
}

namespace {

// How ChooseExchange decides for a spec (ExchangeChoiceRule names it).
enum class ChoiceBasis { kNoCompression, kCastBytes, kPayloadBytes, kPredictedTime };

ChoiceBasis ChoiceBasisOf(const CompressionSpec& spec) {
  if (spec.method == Method::kNone) return ChoiceBasis::kNoCompression;
  if (spec.CastsTo16Bits()) return ChoiceBasis::kCastBytes;
  if (!spec.SelectsEntries()) return ChoiceBasis::kPayloadBytes;
  return ChoiceBasis::kPredictedTime;
}

}  // namespace

bool DenseTwoLevel(int nodes, int local, uint64_t elements, const ExchangeModel& model) {
  if (nodes < 2 || local < 2) return false;
  // A world too large for an int rank count: its ring alone would take
  // over 4e9 steps.
  if (int64_t{nodes} * local > std::numeric_limits<int>::max()) return true;
  const CompressionSpec none;  // the ring's cost does not depend on a spec
  const double world =
      EstimateExchange(ExchangeKind::kDenseRing, nodes * local, elements, none, model).seconds();
  ExchangeModel shared = model;  // `local` rings across the nodes at once
  shared.bytes_per_second /= local;
  const uint64_t shard = (elements + local - 1) / local;
  const double across =
      EstimateExchange(ExchangeKind::kDenseRing, nodes, shard, none, shared).seconds();
  // The reduce-scatter and allgather in the node: one ring's worth.
  const double in_node =
      EstimateExchange(ExchangeKind::kDenseRing, local, elements, none, model).seconds();
  return across + in_node + model.seconds_per_round < world;  // + the verdict's round
}

double DenseSectionSeconds(int ranks, uint64_t dense_elements, const ExchangeModel& model) {
  return std::max(ranks - 1, 0) * 4.0 * static_cast<double>(dense_elements) /
         model.bytes_per_second;
}

bool DenseRidesAllgather(int ranks, uint64_t dense_elements, const ExchangeModel& model) {
  if (ranks < 2) return false;
  const CompressionSpec none;  // the ring's cost does not depend on a spec
  const double ride = DenseSectionSeconds(ranks, dense_elements, model);
  const double ring =
      EstimateExchange(ExchangeKind::kDenseRing, ranks, dense_elements, none, model).seconds();
  return ride <= ring;
}

ExchangeKind ChooseExchange(int ranks, uint64_t elements, const CompressionSpec& spec,
                            const ExchangeModel& model) {
  const ChoiceBasis basis = ChoiceBasisOf(spec);
  if (basis == ChoiceBasis::kNoCompression) return ExchangeKind::kDenseRing;
  if (basis == ChoiceBasis::kCastBytes) {
    // The cast allreduce moves (P-1)/P (2n + 2n) bytes per rank, the
    // allgather (P-1) 2n and the ring (P-1)/P 8n: by bytes, as below, the
    // cast allreduce where 4/P < 2, i.e. from P = 3 (a tie at 2).
    return ranks > 2 ? ExchangeKind::kCastAllreduce : ExchangeKind::kSparseAllgather;
  }
  if (basis == ChoiceBasis::kPayloadBytes) {
    // A codec that sends every element: the ring where its payload to each
    // peer, P - 1 times, is at least the ring's 2 (P - 1)/P 4n (SparCML's
    // rule, by bytes per element: the same answer at every n). Its CPU
    // stays out of this choice: the default rates are the sparse codecs'
    // (a decoded entry is an index and a value), which would hand every
    // quantizer to the ring on an unmeasured model.
    return EveryElementRate(spec) * ranks >= 8 ? ExchangeKind::kDenseRing
                                               : ExchangeKind::kSparseAllgather;
  }
  ExchangeKind best = ExchangeKind::kDenseRing;
  double best_seconds = EstimateExchange(best, ranks, elements, spec, model).seconds();
  for (ExchangeKind kind : {ExchangeKind::kSparseAllgather, ExchangeKind::kSparseAllreduce}) {
    const double t = EstimateExchange(kind, ranks, elements, spec, model).seconds();
    if (t < best_seconds) {
      best = kind;
      best_seconds = t;
    }
  }
  return best;
}

const char* ExchangeChoiceRule(const CompressionSpec& spec) {
  switch (ChoiceBasisOf(spec)) {
    case ChoiceBasis::kNoCompression:
      return "spec 'none': the dense ring";
    case ChoiceBasis::kCastBytes:
      return "bytes alone: fp16 and bf16 take the cast allreduce from 3 ranks, else the "
             "allgather";
    case ChoiceBasis::kPayloadBytes:
      return "bytes alone: a codec that sends every element takes the ring only where its "
             "payload is at least 8n/P bytes";
    case ChoiceBasis::kPredictedTime:
      break;
  }
  return "the cost model's smallest predicted time";
}

namespace {

// The median of all but the first (a warm-up) of at least two values.
double MedianAfterWarmUp(absl::Span<const double> values) {
  std::vector<double> timed(values.begin() + 1, values.end());
  std::nth_element(timed.begin(), timed.begin() + timed.size() / 2, timed.end());
  return timed[timed.size() / 2];
}

}  // namespace

double MeasuredLinkRate(absl::Span<const double> transfer_seconds, double bytes,
                        double latency_seconds) {
  if (transfer_seconds.size() < 2) return 0;
  const double seconds = MedianAfterWarmUp(transfer_seconds) - latency_seconds;
  return bytes / std::max(seconds, 1e-6);
}

namespace {

// This rank's measurement of the link and of `codec` (may be null).
absl::StatusOr<ExchangeModel> Measure(transport::GlooGroup& group, ExchangeModel model,
                                      const Codec* codec) {
  const int p = group.size();
  if (p > 1) {
    // Round latency: small allreduces, DoublingSteps(p) steps each, after
    // one untimed. The CPU of a message: the process's CPU time per trip
    // (the caller's thread, the transport's event loop, the system calls),
    // the median trip's (another thread's work can land in any one),
    // per step: one message sent and one received.
    constexpr int kTrips = 16, kTransfers = 5;
    std::vector<uint64_t> word(1);
    std::vector<double> trip_cpu(kTrips);
    auto trip = [&] {
      return SparseCollectives::AllreduceU64(group, absl::MakeSpan(word),
                                             transport::ReduceOp::kMax);
    };
    GRADWIRE_RETURN_IF_ERROR(trip());
    absl::Time t0 = absl::Now();
    for (double& cpu : trip_cpu) {
      const double cpu0 = ProcessCpuSeconds();
      GRADWIRE_RETURN_IF_ERROR(trip());
      cpu = ProcessCpuSeconds() - cpu0;
    }
    const double steps = DoublingSteps(p);
    model.seconds_per_round = absl::ToDoubleSeconds(absl::Now() - t0) / (kTrips * steps);
    std::nth_element(trip_cpu.begin(), trip_cpu.begin() + kTrips / 2, trip_cpu.end());
    model.seconds_per_message = trip_cpu[kTrips / 2] / steps;
    // Bandwidth: about 1 MB into every rank, kTransfers + 1 times
    // (MeasuredLinkRate drops the first and takes the median).
    const uint64_t block = (uint64_t{1} << 20) / (p - 1);
    std::vector<uint8_t> mine(block, 0x5a), scratch;
    std::vector<uint64_t> caps(p, block);
    std::vector<absl::Span<const uint8_t>> got(p);
    std::vector<double> transfers(kTransfers + 1), transfer_cpu(kTransfers + 1);
    for (int i = 0; i <= kTransfers; ++i) {
      t0 = absl::Now();
      const double cpu0 = ProcessCpuSeconds();
      GRADWIRE_RETURN_IF_ERROR(SparseCollectives::AllgathervBounded(group, mine, caps, block * p,
                                                                    &scratch, absl::MakeSpan(got)));
      transfer_cpu[i] = ProcessCpuSeconds() - cpu0;
      transfers[i] = absl::ToDoubleSeconds(absl::Now() - t0);
    }
    model.bytes_per_second = MeasuredLinkRate(transfers, static_cast<double>(block * (p - 1)),
                                              BruckSteps(p) * model.seconds_per_round);
    // The CPU of the bytes: each rank sent and received (p - 1) blocks in
    // BruckSteps(p) messages each way (the warm-up left out, as above).
    const double bytes_cpu =
        MedianAfterWarmUp(transfer_cpu) - BruckSteps(p) * model.seconds_per_message;
    model.seconds_per_byte = std::max(0.0, bytes_cpu) / (2.0 * block * (p - 1));
  }
  GRADWIRE_ASSIGN_OR_RETURN(model.cores_per_rank, MeasureCoresPerRank(group));
  if (codec != nullptr) {
    GRADWIRE_ASSIGN_OR_RETURN(const CodecTiming timing, TimeCodec(*codec, /*passes=*/true));
    model.encoded_elements_per_second = kTimedElements / std::max(timing.encode_seconds, 1e-6);
    model.streamed_elements_per_second = 2 * kTimedElements / std::max(timing.stream_seconds, 1e-6);
    if (timing.decode_entries_per_second > 0) {
      model.decoded_entries_per_second = timing.decode_entries_per_second;
    }
    // The sparse allreduce's entries: 1/kSparseAllreduceEntryDecodes of
    // the decode rate at kReferenceDensity or below (where the 11 were
    // measured: the codec's own). A denser codec's decode is cheaper per
    // entry, the allreduce's entry is not: the same method is timed at
    // kReferenceDensity instead.
    const CompressionSpec& spec = codec->spec();
    if (spec.SelectsEntries()) {
      double reference = timing.decode_entries_per_second;
      if (spec.ratio > kReferenceDensity) {
        CompressionSpec sparser = spec;
        sparser.ratio = kReferenceDensity;
        GRADWIRE_ASSIGN_OR_RETURN(std::unique_ptr<Codec> at_reference, MakeCodec(sparser));
        GRADWIRE_ASSIGN_OR_RETURN(const CodecTiming t, TimeCodec(*at_reference, false));
        reference = t.decode_entries_per_second;
      }
      if (reference > 0) {
        model.reduced_entries_per_second = reference / kSparseAllreduceEntryDecodes;
      }
    }
  }
  return model;
}

// A figure as the ranks agree on it: a rate (or the cores) that is not
// positive and finite counts as 1e12, a time that is negative or not
// finite as 1e-12, and -0 as +0.
double Sane(const ExchangeModelField& f, double x) {
  if (f.is_time) return x >= 0 && std::isfinite(x) ? x + 0.0 : 1e-12;
  return x > 0 && std::isfinite(x) ? x : 1e12;
}

}  // namespace

absl::StatusOr<ExchangeModel> AgreeExchangeModel(transport::GlooGroup& group,
                                                 const ExchangeModel& mine, bool measure,
                                                 const Codec* codec) {
  ExchangeModel model = mine;
  if (measure) {
    absl::StatusOr<ExchangeModel> measured = Measure(group, mine, codec);
    if (!measured.ok()) return measured.status();
    model = *measured;
  }
  // Every rank's figures to every rank (the same bytes everywhere), then
  // each field agreed by its rule in rank order: every rank computes the
  // same doubles, the least and the most exactly as a rank gave them.
  const absl::Span<const ExchangeModelField> fields = ExchangeModelFields();
  const uint64_t bytes = 8 * fields.size();
  const int p = group.size();
  std::vector<uint8_t> figures(bytes), scratch;
  for (size_t i = 0; i < fields.size(); ++i) {
    uint64_t bits;
    const double x = Sane(fields[i], model.*fields[i].member);
    std::memcpy(&bits, &x, sizeof bits);
    EncodeFixed64(figures.data() + 8 * i, bits);
  }
  std::vector<absl::Span<const uint8_t>> got(p, figures);
  if (p > 1) {
    const std::vector<uint64_t> caps(p, bytes);
    GRADWIRE_RETURN_IF_ERROR(SparseCollectives::AllgathervBounded(group, figures, caps, bytes * p,
                                                                  &scratch, absl::MakeSpan(got)));
  }
  for (int r = 0; r < p; ++r) {
    if (got[r].size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("exchange model of rank ", r, ": ", got[r].size(), " bytes, want ", bytes));
    }
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const ExchangeModelField& f = fields[i];
    double agreed = 0;
    for (int r = 0; r < p; ++r) {
      double x;
      const uint64_t bits = DecodeFixed64(got[r].data() + 8 * i);
      std::memcpy(&x, &bits, sizeof x);
      x = Sane(f, x);  // a peer's bytes
      switch (f.agreement) {
        case ExchangeModelField::Agreement::kLeast:
          agreed = r == 0 ? x : std::min(agreed, x);
          break;
        case ExchangeModelField::Agreement::kMost:
          agreed = r == 0 ? x : std::max(agreed, x);
          break;
        case ExchangeModelField::Agreement::kMean:
          agreed += x;
          break;
      }
    }
    model.*f.member = f.agreement == ExchangeModelField::Agreement::kMean ? agreed / p : agreed;
  }
  return model;
}

}  // namespace gradwire
