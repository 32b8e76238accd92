// One rank of the multi-process communicator tests (driven by
// comm_test.py through tools/launch.py).
//
//   comm_rank <scenario> [key=value ...]
//
// Scenarios:
//   reference  every spec in specs=a;b;..., every size in sizes=..., for
//              steps=N steps: Communicator::AllreduceMean must equal, bit
//              for bit, the CPU reference computed here (every rank's
//              input is a deterministic function of (rank, step, bucket),
//              so each rank can encode every rank's frame itself). Flat,
//              or hierarchical with hier=1 (nodes from LOCAL_WORLD_SIZE).
//              Also per step a mixed bucket (AllreduceMeanWithDense):
//              compressed part and exact dense section, both bit for bit.
//   mismatch   kind=length|spec|step|path|dense_length: the last rank
//              disagrees (dense_length: in a mixed exchange); every
//              rank must get InvalidArgument "collective mismatch" naming
//              it, then FailedPrecondition (poisoned).
//   auth       kind=secret|job: rank 1 holds another secret / job id;
//              every rank's Create must fail in the key round with
//              Unauthenticated / PermissionDenied naming the culprit (or
//              its peers). Should Create let it through, the first
//              exchange (spec=none: dense; else compressed, dense=1 with a
//              dense section) must refuse and leave the data unchanged.
//   async      GradientExchanger over a mixed profile (dense and compressed
//              buckets) must equal the synchronous Communicator and the
//              CPU reference bit for bit; then an error-feedback checkpoint
//              taken after step 1 and restored into a new exchanger must
//              reproduce step 2 exactly.
//   stop       the last rank SIGSTOPs itself between steps; survivors'
//              WaitAll must fail within 2x the deadline, naming it.
//   fault      the last rank exits in the middle of a step; survivors'
//              exchangers must fail (Unavailable / DeadlineExceeded)
//              within 2x the deadline and stay poisoned.
//
// Inputs are multiples of 1/256 in [-4, 4]: sums of up to 64 of them are
// exact in fp32, so the dense stages (Gloo's reduce-scatter and allreduce,
// whose summation order is theirs) have order-independent results and the
// comparison can be bitwise. Output: "CHECK <name> ok|FAILED <why>" lines;
// exit 0 iff every check passed.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/hash_store.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/lib/comm/region_frame.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"
#include "tests/comm/cast_reference.h"
#include "tests/comm/rank_setup.h"

namespace gradwire {
namespace {

using transport::GlooGroup;
using transport::RendezvousConfig;
using transport::RendezvousStore;

std::map<std::string, std::string> g_args;
int g_failures = 0;
RendezvousConfig g_config;
std::shared_ptr<RendezvousStore> g_store;
int g_groups = 0;  // scopes used so far (a fresh one per group)

std::string Arg(const std::string& key, const std::string& fallback) {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : it->second;
}
int64_t IntArg(const std::string& key, int64_t fallback) {
  int64_t v;
  return absl::SimpleAtoi(Arg(key, ""), &v) ? v : fallback;
}

void Check(const std::string& name, bool ok, const std::string& why = "") {
  if (ok) {
    std::printf("CHECK %s ok\n", name.c_str());
  } else {
    ++g_failures;
    std::printf("CHECK %s FAILED %s\n", name.c_str(), why.c_str());
  }
  std::fflush(stdout);
}
bool CheckOk(const std::string& name, const absl::Status& s) {
  Check(name, s.ok(), s.ToString());
  return s.ok();
}

constexpr char kSecret[] = "comm-test-secret-0123456789abcdef";

// The deterministic input of `rank` for (step, bucket): k/256, |k| <= 1024.
std::vector<float> Input(int rank, uint64_t step, uint32_t bucket, uint64_t n) {
  std::vector<float> v(n);
  uint64_t x = (rank + 1) * 0x9E3779B97F4A7C15ull ^ (step + 1) * 0xC2B2AE3D27D4EB4Full ^
               (bucket + 7) * 0x165667B19E3779F9ull;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<float>(static_cast<int>(x % 2049) - 1024) / 256.0f;
  }
  return v;
}

// A fresh communicator on a fresh store scope (every group needs one).
absl::StatusOr<std::unique_ptr<Communicator>> MakeComm(const CompressionSpec& spec, bool hier,
                                                       const std::string& secret,
                                                       const std::string& job) {
  transport::GroupOptions options;
  options.bind_address = "127.0.0.1";  // emulated nodes all live on loopback
  options.timeout = absl::Milliseconds(IntArg("timeout_ms", 20000));
  auto world = GlooGroup::Create(g_config.rank, g_config.world_size,
                                 g_store->Scoped(absl::StrCat("comm", g_groups++)), options);
  if (!world.ok()) return world.status();
  auto js = JobSecret::FromValue(secret, "test");
  if (!js.ok()) return js.status();
  auto auth = FrameAuthenticator::Create(*js, job);
  if (!auth.ok()) return auth.status();
  CommunicatorOptions co;
  co.compression = spec;
  co.hierarchical = hier;
  return Communicator::Create(std::move(*world), g_config.node_id, g_config.local_world_size,
                              std::move(*auth), co);
}

// The CPU reference: what every rank must get.
class Reference {
 public:
  Reference(const CompressionSpec& spec, int world, int local, bool hier)
      : spec_(spec), world_(world), local_(hier ? local : 1), hier_(hier) {}

  // Mean over ranks of bucket `bucket` at `step`, n elements, compressed.
  // `rounded`: by the cast allreduce (cast_allreduce.h), whose owners round
  // the mean to 16 bits and keep what that lost, times the world size, in
  // their residual on the region they own.
  std::vector<float> Compressed(uint32_t bucket, uint64_t step, uint64_t n, std::string* error,
                                bool rounded = false) {
    const int senders = hier_ ? world_ / local_ : world_;
    std::vector<std::vector<float>> inputs(world_);
    for (int r = 0; r < world_; ++r) inputs[r] = Input(r, step, bucket, n);
    std::vector<float> out(n, 0.0f);
    const uint64_t shard = hier_ ? (n + local_ - 1) / local_ : n;
    for (int q = 0; q < local_; ++q) {
      const uint64_t begin = std::min<uint64_t>(n, q * shard);
      const uint64_t len = std::min<uint64_t>(shard, n - begin);
      std::vector<float> sum(len, 0.0f);
      for (int s = 0; s < senders; ++s) {
        // Sender s: a rank (flat) or a node's sum of shard q (hierarchical).
        std::vector<float> in(len, 0.0f);
        if (hier_) {
          for (int l = 0; l < local_; ++l) {
            const std::vector<float>& g = inputs[s * local_ + l];
            for (uint64_t i = 0; i < len; ++i) in[i] += g[begin + i];
          }
        } else {
          in = inputs[s];
        }
        // The rank at position q of sender s encodes (s alone when flat).
        const int encoder = s * local_ + q;
        ErrorFeedback& ef = Ef(encoder);
        const Codec& codec = *codecs_[encoder];
        std::vector<uint8_t> frame(codec.MaxEncodedBytes(len));
        auto enc = ef.Encode(absl::StrCat(bucket), in, step, absl::MakeSpan(frame));
        if (!enc.ok()) {
          *error = enc.status().ToString();
          return {};
        }
        absl::Status d = codec.DecodeAccumulate(absl::MakeConstSpan(frame.data(), enc->frame_bytes),
                                                absl::MakeSpan(sum));
        if (!d.ok()) {
          *error = d.ToString();
          return {};
        }
      }
      for (uint64_t i = 0; i < len; ++i) out[begin + i] = sum[i] / static_cast<float>(world_);
      if (rounded && len > 0) Round(bucket, q, senders, absl::MakeSpan(out.data() + begin, len));
    }
    return out;
  }

  // Whether the Communicator averages a compressed bucket of this spec by
  // the cast allreduce (its cost model: fp16 and bf16 from 3 senders).
  bool CastAllreduces() const {
    return spec_.CastsTo16Bits() && (hier_ ? world_ / local_ : world_) >= 3;
  }

  // Dense mean: exact sum (dyadic inputs), then one division.
  std::vector<float> Dense(uint32_t bucket, uint64_t step, uint64_t n) const {
    std::vector<float> sum(n, 0.0f);
    for (int r = 0; r < world_; ++r) {
      std::vector<float> g = Input(r, step, bucket, n);
      for (uint64_t i = 0; i < n; ++i) sum[i] += g[i];
    }
    for (float& x : sum) x /= static_cast<float>(world_);
    return sum;
  }

 private:
  // The owners' step 6 on shard q: avg rounded to 16 bits (as avg + 0, the
  // codec's kernel on a zero residual), and region j's owner, the rank at
  // position q of sender j, keeps world * what that lost.
  void Round(uint32_t bucket, int q, int senders, absl::Span<float> avg) {
    std::vector<float> lost;
    RoundTo16(spec_.method, avg, avg, &lost);
    std::vector<uint64_t> bounds;
    EvenRegions(avg.size(), senders, &bounds);
    for (int j = 0; j < senders; ++j) {
      KeepRounding(Ef(j * local_ + q).MutableHostResidual(absl::StrCat(bucket)), lost, bounds[j],
                   bounds[j + 1], static_cast<float>(world_));
    }
  }

  ErrorFeedback& Ef(int rank) {
    auto& codec = codecs_[rank];
    if (codec == nullptr) codec = *MakeCodec(spec_.ForSender(rank));
    auto& p = efs_[rank];
    if (p == nullptr) p = std::make_unique<ErrorFeedback>(*codec);
    return *p;
  }

  const CompressionSpec spec_;
  std::map<int, std::unique_ptr<Codec>> codecs_;
  const int world_, local_;
  const bool hier_;
  std::map<int, std::unique_ptr<ErrorFeedback>> efs_;
};

std::string FirstDifference(absl::Span<const float> got, absl::Span<const float> want) {
  if (got.size() != want.size()) return absl::StrCat("length ", got.size(), " vs ", want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0) {
      return absl::StrFormat("element %d: got %.9g, reference %.9g", i, got[i], want[i]);
    }
  }
  return "";
}

void ScenarioReference() {
  const bool hier = IntArg("hier", 0) != 0;
  const int steps = IntArg("steps", 3);
  std::vector<uint64_t> sizes;
  for (absl::string_view s : absl::StrSplit(Arg("sizes", "0,1,7,1000,4099"), ',')) {
    uint64_t v;
    if (absl::SimpleAtoi(s, &v)) sizes.push_back(v);
  }
  for (absl::string_view text : absl::StrSplit(Arg("specs", "topk:ratio=0.01"), ';')) {
    auto spec = CompressionSpec::Parse(text);
    if (!CheckOk(absl::StrCat("parse ", text), spec.status())) continue;
    auto comm = MakeComm(*spec, hier, kSecret, g_config.job_id);
    if (!CheckOk(absl::StrCat("create ", text), comm.status())) return;
    Reference ref(*spec, g_config.world_size, g_config.local_world_size, hier);
    bool all_ok = true;
    uint64_t ring_calls = 0;  // compressed-path calls the cost model sends by the ring
    uint64_t part_rings = 0;  // dense parts that took their own ring (did not ride)
    for (int step = 0; step < steps; ++step) {
      for (uint32_t b = 0; b < sizes.size(); ++b) {
        const uint64_t n = sizes[b];
        std::vector<float> data = Input(g_config.rank, step, b, n);
        absl::Status s =
            (*comm)->AllreduceMean(b, step, absl::MakeSpan(data), ExchangePath::kCompressed);
        const std::string name =
            absl::StrCat(text, hier ? " hier" : " flat", " step ", step, " n=", n);
        if (!CheckOk(name + " status", s)) return;
        // The ring where the cost model sends a bucket by it (8-bit QSGD
        // from 8 ranks, exchange_cost_model.h): exact.
        const bool ring = !hier && (*comm)->KindFor(n) == ExchangeKind::kDenseRing;
        ring_calls += ring;
        std::string error;
        std::vector<float> want =
            ring ? ref.Dense(b, step, n) : ref.Compressed(b, step, n, &error, ref.CastAllreduces());
        if (!error.empty()) {
          Check(name + " reference", false, error);
          return;
        }
        const std::string diff = FirstDifference(data, want);
        if (!diff.empty()) {
          Check(name + " bitwise", false, diff);
          all_ok = false;
        }
      }
      // A mixed bucket (AllreduceMeanWithDense): its compressed part must
      // equal the reference's compressed mean, its dense section the
      // exact dense mean (rank-order sum, as Dense computes it).
      {
        const uint32_t mixed_bucket = 2000, section_bucket = 2001;
        std::vector<float> data = Input(g_config.rank, step, mixed_bucket, 3001);
        std::vector<float> dense = Input(g_config.rank, step, section_bucket, 517);
        absl::Status s = (*comm)->AllreduceMeanWithDense(mixed_bucket, step, absl::MakeSpan(data),
                                                         absl::MakeSpan(dense));
        const std::string name =
            absl::StrCat(text, hier ? " hier" : " flat", " with dense step ", step);
        if (!CheckOk(name + " status", s)) return;
        std::string error;
        // Flat, a dense section rides the allgather's frames (no rounding).
        std::vector<float> want =
            ref.Compressed(mixed_bucket, step, 3001, &error, hier && ref.CastAllreduces());
        if (!error.empty()) return Check(name + " reference", false, error);
        std::string diff = FirstDifference(data, want);
        if (diff.empty()) diff = FirstDifference(dense, ref.Dense(section_bucket, step, 517));
        if (!diff.empty()) Check(name + " bitwise", false, diff), all_ok = false;
      }
      // A large dense part (100,000 elements): every rank would receive
      // every rank's 400 KB in the allgather's frames, where its own ring
      // costs the model less from 4 ranks (DenseRides: the exchanger's
      // DenseRidesAllgather rule): it takes the ring first, and the
      // averages are the same bits either way.
      if (!hier) {
        const uint32_t mixed_bucket = 2002, section_bucket = 2003;
        constexpr uint64_t kLarge = 100000;
        std::vector<float> data = Input(g_config.rank, step, mixed_bucket, 3001);
        std::vector<float> dense = Input(g_config.rank, step, section_bucket, kLarge);
        const bool rides = (*comm)->DenseRides(3001, kLarge);
        part_rings += !rides;
        const std::string name = absl::StrCat(text, " flat with a large dense part step ", step);
        const ExchangeKind kind = (*comm)->KindFor(3001);
        if (kind == ExchangeKind::kSparseAllgather && g_config.world_size >= 4) {
          Check(name + ": the part does not ride", !rides);
        }
        absl::Status s = (*comm)->AllreduceMeanWithDense(mixed_bucket, step, absl::MakeSpan(data),
                                                         absl::MakeSpan(dense));
        if (!CheckOk(name + " status", s)) return;
        Check(name + ": its own ring where it does not ride",
              (*comm)->last_call().dense_buckets == (rides ? 0u : 1u),
              absl::StrCat((*comm)->last_call().dense_buckets));
        // Not riding, the compressed part takes the exchange KindFor picks.
        std::string error;
        std::vector<float> want =
            !rides && kind == ExchangeKind::kDenseRing
                ? ref.Dense(mixed_bucket, step, 3001)
                : ref.Compressed(mixed_bucket, step, 3001, &error, !rides && ref.CastAllreduces());
        if (!error.empty()) return Check(name + " reference", false, error);
        std::string diff = FirstDifference(data, want);
        if (diff.empty()) diff = FirstDifference(dense, ref.Dense(section_bucket, step, kLarge));
        if (!diff.empty()) Check(name + " bitwise", false, diff), all_ok = false;
      }
      // One dense bucket per step (the small-tensor path).
      const uint32_t dense_bucket = 1000;
      std::vector<float> data = Input(g_config.rank, step, dense_bucket, 5003);
      absl::Status s =
          (*comm)->AllreduceMean(dense_bucket, step, absl::MakeSpan(data), ExchangePath::kDense);
      if (!CheckOk(absl::StrCat(text, " dense step ", step), s)) return;
      // Where the model picks two levels (hierarchical, several ranks per
      // node and several nodes: 2 x 2 and 2 x 3 at this size): the node
      // stages and a ring across nodes on a 1/G shard (DenseHierarchical),
      // whose off-node bytes are below the world ring's 2 (P-1)/P 4n.
      const int world = g_config.world_size, local = g_config.local_world_size;
      const bool two_level = (*comm)->DenseTakesTwoLevels(5003);
      if (hier && local > 1 && world > local) {
        Check(absl::StrCat(text, " dense takes two levels here"), two_level);
      }
      const ExchangeStats& last = (*comm)->last_call();
      const uint64_t off_node = last.bytes_sent - last.intra_node_bytes_sent;
      Check(absl::StrCat(text, " dense ", two_level ? "two-level" : "world ring"),
            (last.intra_node_bytes_sent > 0) == two_level &&
                (!two_level || off_node < 2 * (world - 1) * 4 * 5003 / world),
            absl::StrCat("intra-node bytes ", last.intra_node_bytes_sent, ", off-node ", off_node));
      const std::string diff = FirstDifference(data, ref.Dense(dense_bucket, step, 5003));
      if (!diff.empty()) Check(absl::StrCat(text, " dense bitwise"), false, diff), all_ok = false;
    }
    const ExchangeStats& t = (*comm)->totals();
    Check(absl::StrCat(text, hier ? " hier" : " flat", " equals CPU reference"), all_ok);
    Check(absl::StrCat(text, " counters"),
          g_config.world_size == 1 ||
              (t.bytes_sent > 0 && t.compressed_buckets > 0 &&
               t.dense_buckets ==
                   static_cast<uint64_t>(hier ? 2 * steps : steps) + ring_calls + part_rings),
          t.ToString());
    std::printf("STATS %s %s\n", std::string(text).c_str(), t.ToString().c_str());
    // Once per run: a rank that reaches a bucket's first exchange late is
    // waited for in the agreement round, so its peers book the wait as
    // sync time and the transfer (wire - sync) stays short. Later
    // exchanges of the bucket have no agreement round (one bounded block
    // a rank, sparse_allgather.h): the wait is wire time, none of it sync.
    static bool late_checked = false;
    const uint32_t last = static_cast<uint32_t>(sizes.size()) - 1;  // a size it has
    if (g_config.world_size > 1 && !late_checked && !sizes.empty() && sizes[last] > 0) {
      late_checked = true;
      const absl::Duration late = absl::Milliseconds(300);
      const uint32_t fresh = 1000;  // a bucket number no exchange used yet
      for (int round = 0; round < 2; ++round) {
        const bool first = round == 0;
        if (g_config.rank == 0) absl::SleepFor(late);
        std::vector<float> data = Input(g_config.rank, steps + round, last, sizes[last]);
        if (!CheckOk("late rank exchange",
                     (*comm)->AllreduceMean(fresh, steps + round, absl::MakeSpan(data),
                                            ExchangePath::kCompressed))) {
          return;
        }
        const ExchangeStats& c = (*comm)->last_call();
        const std::string why = absl::StrCat(first ? "first exchange: " : "second exchange: ",
                                             c.ToString());
        Check("sync time is within wire time", c.sync_time <= c.wire_time, why);
        if (g_config.rank == 0) {
          Check("the late rank waits for nobody", c.wire_time < late * 0.8, why);
        } else if (first || hier) {
          // The hierarchical exchange agrees over the world before every
          // bucket (SparseAllgather::Agree): the wait stays sync time.
          Check("a peer's wait for the late rank is sync time", c.sync_time >= late * 0.8, why);
          Check("and not transfer time", c.wire_time - c.sync_time < late * 0.8, why);
        } else {
          Check("a peer's wait without an agreement round is wire time",
                c.wire_time >= late * 0.8 && c.sync_time == absl::ZeroDuration(), why);
        }
      }
    }
    CheckOk(absl::StrCat(text, " close"), (*comm)->Close());
    absl::Status after = (*comm)->AllreduceMean(0, steps, {}, ExchangePath::kDense);
    Check(absl::StrCat(text, " unusable after close"), absl::IsFailedPrecondition(after),
          after.ToString());
  }
}

void ScenarioMismatch() {
  const std::string kind = Arg("kind", "length");
  const bool hier = IntArg("hier", 0) != 0;
  const int odd = g_config.world_size - 1;
  const bool me_odd = g_config.rank == odd;
  auto spec =
      CompressionSpec::Parse(kind == "spec" && me_odd ? "topk:ratio=0.02" : "topk:ratio=0.01");
  auto comm = MakeComm(*spec, hier, kSecret, g_config.job_id);
  if (!CheckOk("create", comm.status())) return;
  // late=1: bucket 0 is first exchanged in agreement, so the mismatch
  // comes in a later exchange, the one-round path whose table is checked
  // once the blocks are in (sparse_allgather.h); the errors must be the
  // same. (Not for kind=length: the odd rank's residual of 3000 elements
  // refuses 3001 before anything is sent.)
  if (IntArg("late", 0) != 0) {
    std::vector<float> agreed = Input(g_config.rank, 0, 0, 3000);
    if (!CheckOk("agreed exchange first",
                 (*comm)->AllreduceMean(0, 4, absl::MakeSpan(agreed), ExchangePath::kCompressed))) {
      return;
    }
  }
  uint64_t n = 3000, step = 5;
  ExchangePath path = ExchangePath::kCompressed;
  if (kind == "length" && me_odd) n = 3001;
  if (kind == "step" && me_odd) step = 6;
  if (kind == "path" && me_odd) path = ExchangePath::kDense;
  std::vector<float> data = Input(g_config.rank, 0, 0, n);
  const std::vector<float> before = data;
  // kind=dense_length: a mixed exchange whose dense sections differ.
  std::vector<float> dense = Input(g_config.rank, 0, 1, me_odd ? 40 : 41);
  const std::vector<float> dense_before = dense;
  absl::Status s =
      kind == "dense_length"
          ? (*comm)->AllreduceMeanWithDense(0, step, absl::MakeSpan(data), absl::MakeSpan(dense))
          : (*comm)->AllreduceMean(0, step, absl::MakeSpan(data), path);
  if (kind == "dense_length") {
    Check("mismatch names the dense section",
          absl::StrContains(s.message(), "dense section length"), s.ToString());
    Check("dense section unchanged", dense == dense_before);
  }
  Check("mismatch reported",
        absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "collective mismatch"),
        s.ToString());
  std::printf("MISMATCH %s\n", s.ToString().c_str());
  // Naming the odd rank matters only where the table is ours (the
  // transport's agreement round names ranks its own way).
  Check("mismatch names the odd rank", absl::StrContains(s.message(), absl::StrCat(odd)),
        s.ToString());
  Check("data unchanged", data == before);
  absl::Status again = (*comm)->AllreduceMean(0, step + 1, absl::MakeSpan(data), path);
  Check("poisoned afterwards", absl::IsFailedPrecondition(again), again.ToString());
}

// Every rank changes a bucket's shape together after it was agreed (the
// dense section's length: the compressed part's length is held by its
// error-feedback residual): the one-round exchange carries descriptors
// only (a frame of the new shape could outgrow the agreed blocks), the
// frames follow by the table, and the next exchange of the new shape
// takes one round again. Every result equals the CPU reference bit for
// bit.
void ScenarioReshape() {
  auto spec = CompressionSpec::Parse(Arg("spec", "topk:ratio=0.01"));
  if (!CheckOk("parse", spec.status())) return;
  auto comm = MakeComm(*spec, false, kSecret, g_config.job_id);
  if (!CheckOk("create", comm.status())) return;
  Reference ref(*spec, g_config.world_size, 1, false);
  const uint32_t bucket = 0, section_bucket = 1;
  const uint64_t sections[] = {40, 40, 300, 300, 0, 0, 7, 7};
  for (uint64_t step = 0; step < 8; ++step) {
    const uint64_t d = sections[step];
    std::vector<float> data = Input(g_config.rank, step, bucket, 3000);
    std::vector<float> dense = Input(g_config.rank, step, section_bucket, d);
    const std::string name = absl::StrCat("reshape step ", step, " dense=", d);
    if (!CheckOk(name, (*comm)->AllreduceMeanWithDense(bucket, step, absl::MakeSpan(data),
                                                       absl::MakeSpan(dense)))) {
      return;
    }
    std::string error;
    const std::vector<float> want = ref.Compressed(bucket, step, 3000, &error);
    if (!error.empty()) return Check(name + " reference", false, error);
    std::string diff = FirstDifference(data, want);
    if (diff.empty()) diff = FirstDifference(dense, ref.Dense(section_bucket, step, d));
    Check(name + " equals the CPU reference", diff.empty(), diff);
    // The bucket's first exchange has an agreement round (sync time); the
    // second of each shape has none. (The reshaping ones have none
    // either: their table came in the bounded round.)
    const ExchangeStats& last = (*comm)->last_call();
    if (step == 0) {
      Check(name + " took the agreement round", last.sync_time > absl::ZeroDuration(),
            last.ToString());
    } else if (step % 2 == 1) {
      Check(name + " took one round", last.sync_time == absl::ZeroDuration(), last.ToString());
    }
  }
}

void ScenarioAuth() {
  const std::string kind = Arg("kind", "secret");
  const bool hier = IntArg("hier", 0) != 0;
  const bool me_odd = g_config.rank == 1;
  std::string secret = kSecret, job = g_config.job_id;
  if (me_odd && kind == "secret") secret = "another-secret-entirely-0123456789";
  if (me_odd && kind == "job") job += "-other";
  auto want = [&](const absl::Status& s) {
    return kind == "secret" ? absl::IsUnauthenticated(s) : absl::IsPermissionDenied(s);
  };
  auto spec = CompressionSpec::Parse(Arg("spec", "topk:ratio=0.05"));
  if (!CheckOk("parse", spec.status())) return;
  auto comm = MakeComm(*spec, hier, secret, job);
  // Every rank refuses in Create's key round, before any gradient moves:
  // the others name rank 1, rank 1 names the others.
  Check(absl::StrCat(kind, " refused at create"), want(comm.status()), comm.status().ToString());
  std::printf("AUTH %s\n", comm.status().ToString().c_str());
  if (!comm.ok()) {
    const std::string named = me_odd ? "rank(s) [0" : "rank(s) [1]";
    Check("culprit named", absl::StrContains(comm.status().message(), named),
          comm.status().ToString());
    return;
  }
  // Create let it through (the key round's check is broken): the first
  // exchange must still refuse (dense: the chunk MACs; compressed: the
  // frame MACs) and leave the data as it was.
  std::vector<float> data = Input(g_config.rank, 3, 2, 4000);
  const std::vector<float> before = data;
  std::vector<float> dense = Input(g_config.rank, 3, 3, IntArg("dense", 0) ? 300 : 0);
  const std::vector<float> dense_before = dense;
  absl::Status s =
      spec->method == Method::kNone
          ? (*comm)->AllreduceMean(2, 3, absl::MakeSpan(data), ExchangePath::kDense)
          : (*comm)->AllreduceMeanWithDense(2, 3, absl::MakeSpan(data), absl::MakeSpan(dense));
  Check(absl::StrCat(kind, " rejected at the first exchange"),
        absl::IsUnauthenticated(s) || absl::IsPermissionDenied(s), s.ToString());
  std::printf("AUTH exchange %s\n", s.ToString().c_str());
  Check("dense section unchanged", dense == dense_before);
  Check("data unchanged", data == before);
}

struct TensorSpec {
  const char* name;
  uint64_t n;
  bool one_d;
};
// A small "model": small, 1-D, empty and large tensors, in backprop order.
const TensorSpec kProfile[] = {
    {"fc.bias", 10, true},     {"fc.weight", 20000, false},
    {"bn3.bias", 17000, true}, {"conv3.weight", 70000, false},
    {"empty", 0, false},       {"conv2.weight", 16384, false},
    {"bn2.weight", 300, true}, {"conv1.weight", 16383, false},
    {"embed", 40001, false},
};

void ScenarioAsync() {
  const bool hier = IntArg("hier", 0) != 0;
  auto spec = CompressionSpec::Parse(Arg("spec", "topk:ratio=0.05"));
  if (!CheckOk("parse", spec.status())) return;
  auto comm_async = MakeComm(*spec, hier, kSecret, g_config.job_id);
  auto comm_sync = MakeComm(*spec, hier, kSecret, g_config.job_id);
  if (!CheckOk("create", comm_async.status()) || !CheckOk("create", comm_sync.status())) return;
  ExchangerOptions eo;
  eo.bucket_bytes = IntArg("bucket_bytes", 200000);
  auto ex = GradientExchanger::Create(std::move(*comm_async), eo);
  if (!CheckOk("exchanger", ex.status())) return;
  Communicator& sync = **comm_sync;
  const int steps = 3;
  std::string saved;
  std::vector<std::vector<float>> last_result;
  // Tensor inputs: distinct "buckets" for Input() by tensor index.
  auto tensor_input = [](int rank, uint64_t step, size_t t) {
    return Input(rank, step, 500 + t, kProfile[t].n);
  };
  for (int step = 0; step < steps; ++step) {
    if (!CheckOk("begin", (*ex)->BeginStep(step))) return;
    std::vector<std::vector<float>> grads;
    std::vector<BucketTicket> tickets;
    for (size_t t = 0; t < std::size(kProfile); ++t)
      grads.push_back(tensor_input(g_config.rank, step, t));
    for (size_t t = 0; t < std::size(kProfile); ++t) {
      const int64_t shape2[] = {1, static_cast<int64_t>(kProfile[t].n)};
      const int64_t shape1[] = {static_cast<int64_t>(kProfile[t].n)};
      auto ticket = (*ex)->Submit(
          kProfile[t].name, absl::MakeSpan(grads[t]),
          kProfile[t].one_d ? absl::MakeConstSpan(shape1) : absl::MakeConstSpan(shape2));
      if (!CheckOk("submit", ticket.status())) return;
      tickets.push_back(*ticket);
    }
    if (!CheckOk("flush", (*ex)->Flush())) return;
    if (!CheckOk("wait first", (*ex)->Wait(tickets[0], absl::Seconds(30)))) return;
    if (!CheckOk("wait all", (*ex)->WaitAll(absl::Seconds(30)))) return;
    if (step == 0) std::printf("PLAN\n%s", (*ex)->DescribePlan().c_str());
    const ExchangeStats st = (*ex)->StepStats();
    std::printf("STEP %d %s\n", step, st.ToString().c_str());
    Check(absl::StrCat("step ", step, " counters"),
          (st.dense_buckets > 0 || IntArg("expect_ride", 0) != 0) && st.compressed_buckets > 0 &&
              (g_config.world_size == 1 || st.bytes_received > 0) &&
              (hier && g_config.local_world_size > 1) == (st.intra_node_bytes_sent > 0),
          st.ToString());
    if (!hier && spec->CastsTo16Bits() && g_config.world_size >= 4) {
      Check(absl::StrCat("step ", step, ": every compressed bucket by the cast allreduce"),
            st.cast_allreduce_buckets == st.compressed_buckets, st.ToString());
    }

    // The same buckets through the synchronous communicator: rebuild each
    // bucket's fused input from the plan.
    std::map<std::string, size_t> index;
    for (size_t t = 0; t < std::size(kProfile); ++t) index[kProfile[t].name] = t;
    // A dense tail that rides (BucketInfo::carried_by) is its carrier's
    // AllreduceMeanWithDense.
    bool equal = true;
    const std::vector<BucketInfo> plan = (*ex)->Plan();
    std::vector<std::vector<float>> fused_of(plan.size());
    for (const BucketInfo& b : plan) {
      for (const std::string& name : b.tensors) {
        std::vector<float> g = tensor_input(g_config.rank, step, index[name]);
        fused_of[b.id].insert(fused_of[b.id].end(), g.begin(), g.end());
      }
    }
    bool rides = false;
    for (const BucketInfo& b : plan) {
      if (b.carried_by >= 0) {
        rides = true;
        continue;
      }
      const BucketInfo* rider = nullptr;
      for (const BucketInfo& r : plan) {
        if (r.carried_by == static_cast<int64_t>(b.id)) rider = &r;
      }
      absl::Status s = rider == nullptr
                           ? sync.AllreduceMean(b.id, step, absl::MakeSpan(fused_of[b.id]), b.path)
                           : sync.AllreduceMeanWithDense(b.id, step, absl::MakeSpan(fused_of[b.id]),
                                                         absl::MakeSpan(fused_of[rider->id]));
      if (!CheckOk("sync", s)) return;
    }
    Check("the dense tail rides where expected", rides == (IntArg("expect_ride", 0) != 0),
          (*ex)->DescribePlan());
    for (const BucketInfo& b : plan) {
      const std::vector<float>& fused = fused_of[b.id];
      size_t off = 0;
      for (const std::string& name : b.tensors) {
        const size_t t = index[name];
        std::string diff =
            FirstDifference(grads[t], absl::MakeConstSpan(fused.data() + off, kProfile[t].n));
        if (!diff.empty()) {
          Check(absl::StrCat("async == sync step ", step, " ", name), false, diff);
          equal = false;
        }
        off += kProfile[t].n;
      }
    }
    Check(absl::StrCat("async == sync step ", step), equal);
    if (step == 1) {
      auto state = (*ex)->SaveState();
      if (!CheckOk("save state", state.status())) return;
      saved = *state;
    }
    if (step == steps - 1) last_result = grads;
  }

  // Restore the step-1 checkpoint into a new exchanger and replay the last
  // step: must reproduce it bit for bit (the residuals are the only state).
  auto comm_restored = MakeComm(*spec, hier, kSecret, g_config.job_id);
  if (!CheckOk("create restored", comm_restored.status())) return;
  auto ex2 = GradientExchanger::Create(std::move(*comm_restored), eo);
  if (!CheckOk("exchanger 2", ex2.status())) return;
  std::string corrupt = saved;
  corrupt[corrupt.size() / 2] ^= 1;
  absl::Status bad = (*ex2)->RestoreState(corrupt);
  Check("corrupt checkpoint refused", absl::IsDataLoss(bad), bad.ToString());
  if (!CheckOk("restore", (*ex2)->RestoreState(saved))) return;
  const int step = steps - 1;
  if (!CheckOk("begin 2", (*ex2)->BeginStep(step))) return;
  std::vector<std::vector<float>> grads;
  for (size_t t = 0; t < std::size(kProfile); ++t)
    grads.push_back(tensor_input(g_config.rank, step, t));
  for (size_t t = 0; t < std::size(kProfile); ++t) {
    const int64_t shape2[] = {1, static_cast<int64_t>(kProfile[t].n)};
    const int64_t shape1[] = {static_cast<int64_t>(kProfile[t].n)};
    if (!CheckOk("submit 2", (*ex2)
                                 ->Submit(kProfile[t].name, absl::MakeSpan(grads[t]),
                                          kProfile[t].one_d ? absl::MakeConstSpan(shape1)
                                                            : absl::MakeConstSpan(shape2))
                                 .status()))
      return;
  }
  if (!CheckOk("flush 2", (*ex2)->Flush())) return;
  if (!CheckOk("wait 2", (*ex2)->WaitAll(absl::Seconds(30)))) return;
  bool same = true;
  for (size_t t = 0; t < std::size(kProfile); ++t) {
    std::string diff = FirstDifference(grads[t], last_result[t]);
    if (!diff.empty())
      Check(absl::StrCat("restored ", kProfile[t].name), false, diff), same = false;
  }
  Check("checkpoint round trip reproduces the step", same);

  // Barrier between steps: no rank returns before the last one arrives.
  if (g_config.rank == 0) absl::SleepFor(absl::Milliseconds(300));
  const absl::Time barrier_start = absl::Now();
  if (!CheckOk("barrier", (*ex)->Barrier(absl::Seconds(30)))) return;
  const absl::Duration waited = absl::Now() - barrier_start;
  if (g_config.rank != 0 && g_config.world_size > 1) {
    Check("barrier waits for the last rank", waited >= absl::Milliseconds(250),
          absl::FormatDuration(waited));
  }
  CheckOk("close exchanger", (*ex)->Close(absl::Seconds(30)));
  CheckOk("close sync", sync.Close());
  CheckOk("close restored", (*ex2)->Close(absl::Seconds(30)));
  absl::Status after = (*ex2)->BeginStep(1000);
  Check("exchanger unusable after close", absl::IsFailedPrecondition(after), after.ToString());
  absl::Status barrier_after = (*ex2)->Barrier(absl::Seconds(1));
  Check("no barrier after close", absl::IsFailedPrecondition(barrier_after),
        barrier_after.ToString());
}

// A rank dies (SIGKILL-like: _exit without closing anything cleanly) in
// the middle of step `die_step`, after submitting half its tensors; every
// survivor must see its exchanger fail with Unavailable or
// DeadlineExceeded within 2x the transport deadline, and stay poisoned.
void ScenarioFault() {
  const bool hier = IntArg("hier", 0) != 0;
  const int die_step = IntArg("die_step", 2);
  const int victim = g_config.world_size - 1;
  auto spec = CompressionSpec::Parse(Arg("spec", "topk:ratio=0.05"));
  auto comm = MakeComm(*spec, hier, kSecret, g_config.job_id);
  if (!CheckOk("create", comm.status())) return;
  ExchangerOptions eo;
  eo.bucket_bytes = 100000;
  auto ex = GradientExchanger::Create(std::move(*comm), eo);
  if (!CheckOk("exchanger", ex.status())) return;
  const absl::Duration deadline = absl::Milliseconds(IntArg("timeout_ms", 20000));
  absl::Status failure;
  absl::Time failed_after_start;
  // barrier=1: the victim dies before the barrier that opens die_step.
  const bool barrier = IntArg("barrier", 0) != 0;
  for (int step = 0; step < die_step + 5 && failure.ok(); ++step) {
    if (barrier) {
      failed_after_start = absl::Now();
      if (step == die_step && g_config.rank == victim) {
        std::fflush(stdout);
        _exit(0);
      }
      if (absl::Status s = (*ex)->Barrier(3 * deadline); !s.ok()) {
        failure = s;
        break;
      }
    }
    if (absl::Status s = (*ex)->BeginStep(step); !s.ok()) {
      failure = s;
      break;
    }
    std::vector<std::vector<float>> grads;
    for (size_t t = 0; t < std::size(kProfile); ++t) {
      grads.push_back(Input(g_config.rank, step, 500 + t, kProfile[t].n));
    }
    const absl::Time start = absl::Now();
    for (size_t t = 0; t < std::size(kProfile) && failure.ok(); ++t) {
      if (step == die_step && g_config.rank == victim && t == std::size(kProfile) / 2) {
        std::fflush(stdout);
        _exit(0);
      }
      auto ticket = (*ex)->Submit(kProfile[t].name, absl::MakeSpan(grads[t]));
      if (!ticket.ok()) failure = ticket.status();
    }
    if (failure.ok()) failure = (*ex)->Flush();
    if (failure.ok()) failure = (*ex)->WaitAll(3 * deadline);
    failed_after_start = start;
  }
  const absl::Duration took = absl::Now() - failed_after_start;
  // Whichever call noticed first, health() holds the root cause.
  const absl::Status root = (*ex)->health();
  std::printf("FAULT %s after %.0f ms (first error seen: %s)\n", root.ToString().c_str(),
              absl::ToDoubleMilliseconds(took), failure.ToString().c_str());
  Check("survivor sees the failure", absl::IsUnavailable(root) || absl::IsDeadlineExceeded(root),
        root.ToString());
  Check("within 2x the deadline", took <= 2 * deadline, absl::FormatDuration(took));
  absl::Status later = (*ex)->BeginStep(1000);
  Check("poisoned afterwards", absl::IsFailedPrecondition(later), later.ToString());
}

// Issue 19: the last rank stops (SIGSTOP) between steps; every survivor's
// WaitAll, given 3/4 of the transport's deadline (so it expires while the
// bucket is on the wire, and then waits for the transport's verdict), must
// return within 2x the deadline with DeadlineExceeded that says what was
// not exchanged and carries the transport's verdict naming the stopped
// rank. A child process
// resumes the victim once the survivors are done, and it exits quietly.
void ScenarioStop() {
  const int victim = g_config.world_size - 1;
  const int stop_step = static_cast<int>(IntArg("stop_step", 2));
  const absl::Duration deadline = absl::Milliseconds(IntArg("timeout_ms", 2000));
  auto spec = CompressionSpec::Parse(Arg("spec", "topk:ratio=0.05"));
  auto comm = MakeComm(*spec, IntArg("hier", 0) != 0, kSecret, g_config.job_id);
  if (!CheckOk("create", comm.status())) return;
  ExchangerOptions eo;
  eo.bucket_bytes = 100000;
  auto ex = GradientExchanger::Create(std::move(*comm), eo);
  if (!CheckOk("exchanger", ex.status())) return;
  for (int step = 0; step <= stop_step; ++step) {
    if (step == stop_step && g_config.rank == victim) {
      const pid_t me = getpid();
      if (fork() == 0) {  // only async-signal-safe calls in the child
        usleep(static_cast<useconds_t>(absl::ToInt64Microseconds(3 * deadline)));
        kill(me, SIGCONT);
        _exit(0);
      }
      std::printf("STOPPING at step %d\n", step);
      std::fflush(stdout);
      raise(SIGSTOP);
      Check("victim resumed", true);
      return;
    }
    if (!CheckOk(absl::StrCat("begin step ", step), (*ex)->BeginStep(step))) return;
    std::vector<std::vector<float>> grads;
    for (size_t t = 0; t < std::size(kProfile); ++t) {
      grads.push_back(Input(g_config.rank, step, 600 + t, kProfile[t].n));
    }
    for (size_t t = 0; t < std::size(kProfile); ++t) {
      (void)(*ex)->Submit(kProfile[t].name, absl::MakeSpan(grads[t]));
    }
    const absl::Time start = absl::Now();
    absl::Status s = (*ex)->Flush();
    if (s.ok()) s = (*ex)->WaitAll(deadline * 3 / 4);
    const absl::Duration took = absl::Now() - start;
    if (step < stop_step) {
      if (!CheckOk(absl::StrCat("step ", step), s)) return;
      continue;
    }
    std::printf("STOP %s after %.0f ms\n", s.ToString().c_str(), absl::ToDoubleMilliseconds(took));
    Check("deadline exceeded", absl::IsDeadlineExceeded(s), s.ToString());
    Check("says what was not exchanged",
          absl::StrContains(s.message(), absl::StrCat("of step ", step, " not exchanged within")),
          s.ToString());
    Check("names the stopped rank",
          absl::StrContains(s.message(), absl::StrCat("rank ", victim, " did not arrive")),
          s.ToString());
    Check("within 2x the deadline", took <= 2 * deadline, absl::FormatDuration(took));
  }
}

int Main(int argc, char** argv) {
  std::optional<RankSetup> setup = StartRank(argc, argv);
  if (!setup) return 2;
  g_args = setup->args;
  g_config = setup->config;
  g_store = setup->store;
  const std::string scenario = setup->scenario;
  if (scenario == "reference") {
    ScenarioReference();
  } else if (scenario == "mismatch") {
    ScenarioMismatch();
  } else if (scenario == "reshape") {
    ScenarioReshape();
  } else if (scenario == "auth") {
    ScenarioAuth();
  } else if (scenario == "async") {
    ScenarioAsync();
  } else if (scenario == "fault") {
    ScenarioFault();
  } else if (scenario == "stop") {
    ScenarioStop();
  } else {
    std::printf("SETUP unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) { return gradwire::Main(argc, argv); }
