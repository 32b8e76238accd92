// One rank of the cast allreduce tests (driven by sparse_allreduce_test.py
// through tools/launch.py; every rank is its own process on loopback).
//
//   cast_allreduce_rank <scenario> [key=value ...]
//
// Scenarios:
//   reference    CastAllreduce::Run for every spec in specs=a;b, every size
//                in sizes=..., steps=N steps: the output must equal, bit
//                for bit, the 16-bit rounding of the codec's DecodeAverage
//                of every rank's frame (the sparse allgather's result),
//                computed here (each rank's input is a function of (rank,
//                step, bucket), so every rank can encode every rank's frame
//                itself), and the residual this rank's reference error
//                feedback plus, on the region it owns, the divisor times
//                what the rounding lost. From 100000 elements the bytes
//                sent must be at most 0.51 of the fp32 ring's.
//   communicator a Communicator picking by its cost model (flat, or hier=1)
//                and two forced to the sparse allgather and to the cast
//                allreduce, on the same gradients: the picked exchange (the
//                cast allreduce from 3 ranks or nodes) gives what the one
//                forced to it gives, bit for bit, every step; at step 0 the
//                cast allreduce's output is the allgather's rounded to 16
//                bits (flat: each owner's residual as above).
//   mismatch     kind=length|spec|step: the last rank disagrees; every rank
//                gets InvalidArgument "collective mismatch" naming it, with
//                `out` unchanged.
//   auth         kind=secret|job: rank 1 signs with another secret / job;
//                kind=tamper: rank 1 flips a bit of its contribution to
//                rank 0 only, so the others learn it from rank 0's verdict.
//                Every rank must fail, `out` unchanged.
//   fault        the last rank exits before step 1; the others must fail
//                with Unavailable / DeadlineExceeded within 2x the deadline.
// Any scenario: direct_max=0 makes the groups gather as above 16 ranks, so
// the exchange agrees by recursive doubling.
// Output: "CHECK <name> ok|FAILED <why>" lines; exit 0 iff all passed.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/cast_allreduce.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/region_frame.h"
#include "gradwire/lib/comm/session_chunk_auth.h"
#include "tests/comm/cast_reference.h"
#include "tests/comm/rank_env.h"
#include "tests/comm/rank_setup.h"

namespace gradwire {
namespace {

constexpr char kSecret[] = "cast-allreduce-test-secret-0123456789";

// What one exchange needs, at stable addresses.
struct Rig {
  std::unique_ptr<GlooGroup> group;
  std::unique_ptr<FrameAuthenticator> auth;
  std::unique_ptr<transport::ChunkAuthenticator> chunk_auth;
  std::unique_ptr<Codec> codec;
  std::unique_ptr<ErrorFeedback> ef;
  std::unique_ptr<CastAllreduce> exchange;

  absl::Status Run(uint32_t bucket, uint64_t step, std::vector<float>* data,
                   ExchangeStats* stats = nullptr) {
    return exchange->Run(*group, *ef, absl::StrCat(bucket), bucket, step, *data,
                         absl::MakeSpan(*data), env.world(), stats);
  }
};

// Null (after a failed check) if any part cannot be made.
std::unique_ptr<Rig> NewRig(const std::string& spec_text, const std::string& secret,
                            const std::string& job,
                            const CastAllreduceOptions& options = CastAllreduceOptions()) {
  auto spec = CompressionSpec::Parse(spec_text);
  auto group = NewGroup();
  auto auth = NewAuth(secret, job);
  if (!ExpectOk(spec.status(), "spec") || !ExpectOk(group.status(), "group") ||
      !ExpectOk(auth.status(), "auth")) {
    return nullptr;
  }
  auto rig = std::make_unique<Rig>();
  rig->group = std::move(*group);
  rig->auth = std::make_unique<FrameAuthenticator>(std::move(*auth));
  auto session = AgreeSessionAuth(*rig->group, *rig->auth);
  if (!session.ok()) {
    // A wrong secret or job fails here on every rank, before any frame.
    std::printf("CHUNKAUTH %s\n", session.status().ToString().c_str());
    return nullptr;
  }
  rig->chunk_auth = std::move(session->chunks);
  rig->codec = *MakeCodec(spec->ForSender(env.rank()));
  rig->ef = std::make_unique<ErrorFeedback>(*rig->codec);
  rig->exchange =
      std::make_unique<CastAllreduce>(*rig->codec, *rig->auth, *rig->chunk_auth, options);
  return rig;
}

// Every rank's codec and error feedback, run here: the frames every rank
// sends and their DecodeAverage.
class Reference {
 public:
  explicit Reference(const CompressionSpec& spec) {
    for (int r = 0; r < env.world(); ++r) {
      codecs_.push_back(*MakeCodec(spec.ForSender(r)));
      efs_.push_back(std::make_unique<ErrorFeedback>(*codecs_.back()));
    }
  }
  std::vector<float> Exchange(uint32_t bucket, uint64_t step, uint64_t n) {
    std::vector<std::vector<uint8_t>> frames(env.world());
    std::vector<absl::Span<const uint8_t>> views;
    for (int r = 0; r < env.world(); ++r) {
      frames[r].resize(codecs_[r]->MaxEncodedBytes(n));
      const std::vector<float> g = Gradient(r, step, bucket, n, false);
      auto encoded = efs_[r]->Encode(absl::StrCat(bucket), g, step, absl::MakeSpan(frames[r]));
      MustSucceed(encoded.status());
      views.push_back(absl::MakeConstSpan(frames[r].data(), encoded->frame_bytes));
    }
    std::vector<float> out(n), lost;
    MustSucceed(codecs_[env.rank()]->DecodeAverage(views, env.world(), absl::MakeSpan(out)));
    // The owners' rounding, and what it lost into each owner's residual.
    RoundTo16(codecs_[env.rank()]->spec().method, out, absl::MakeSpan(out), &lost);
    std::vector<uint64_t> bounds;
    EvenRegions(n, env.world(), &bounds);
    for (int r = 0; r < env.world(); ++r) {
      KeepRounding(efs_[r]->MutableHostResidual(absl::StrCat(bucket)), lost, bounds[r],
                   bounds[r + 1], env.world());
    }
    return out;
  }
  absl::Span<const float> Residual(uint32_t bucket) const {
    return efs_[env.rank()]->Residual(absl::StrCat(bucket));
  }

 private:
  static void MustSucceed(const absl::Status& s) {
    if (!s.ok()) {
      std::printf("SETUP reference: %s\n", s.ToString().c_str());
      std::exit(2);
    }
  }
  std::vector<std::unique_ptr<Codec>> codecs_;
  std::vector<std::unique_ptr<ErrorFeedback>> efs_;
};

void ScenarioReference() {
  const int steps = static_cast<int>(env.Number("steps", 2));
  std::vector<uint64_t> sizes;
  for (absl::string_view t : absl::StrSplit(env.Text("sizes", "0,1,1000"), ',')) {
    uint64_t v = 0;
    if (absl::SimpleAtoi(t, &v)) sizes.push_back(v);
  }
  for (absl::string_view spec_text : absl::StrSplit(env.Text("specs", "fp16;bf16"), ';')) {
    auto rig = NewRig(std::string(spec_text), kSecret, env.config.job_id);
    if (rig == nullptr) return;
    Reference ref(rig->codec->spec());
    for (int step = 0; step < steps; ++step) {
      for (size_t b = 0; b < sizes.size(); ++b) {
        const uint64_t n = sizes[b];
        const std::string name = absl::StrCat(spec_text, " n=", n, " step ", step);
        std::vector<float> data = Gradient(env.rank(), step, b, n, false);
        ExchangeStats stats;
        if (!ExpectOk(rig->Run(b, step, &data, &stats), name)) return;
        const std::string diff = Differs(data, ref.Exchange(b, step, n));
        Expect(diff.empty(), name + ": output bitwise", diff);
        const std::string residual = Differs(rig->ef->Residual(absl::StrCat(b)), ref.Residual(b));
        Expect(residual.empty(), name + ": residual bitwise", residual);
        Expect(stats.cast_allreduce_buckets == 1 && stats.elements == n, name + ": counted");
        if (n >= 100000 && env.world() > 1) {
          const double ring = 2.0 * (env.world() - 1) / env.world() * 4 * n;
          Expect(stats.bytes_sent <= 0.51 * ring, name + ": at most 0.51 of the ring's bytes",
                 absl::StrCat(stats.bytes_sent, " vs ring ", ring));
        }
      }
    }
  }
}

void ScenarioCommunicator() {
  const bool hier = env.Number("hier", 0) != 0;
  const int local = hier ? env.config.local_world_size : 1;
  const int crossing = env.world() / local;
  const uint64_t n = env.Number("n", 50000);
  const std::string spec_text = env.Text("spec", "fp16");
  const CompressionSpec options_spec = *CompressionSpec::Parse(spec_text);
  // 0: picks by its cost model; 1: forced to the allgather; 2: forced to
  // the cast allreduce.
  std::unique_ptr<Communicator> comms[3];
  for (int c = 0; c < 3; ++c) {
    auto group = NewGroup();
    auto auth = NewAuth(kSecret, env.config.job_id);
    if (!ExpectOk(group.status(), "group") || !ExpectOk(auth.status(), "auth")) return;
    CommunicatorOptions options;
    options.compression = *CompressionSpec::Parse(spec_text);
    options.hierarchical = hier;
    if (c == 1) options.exchange = ExchangeKind::kSparseAllgather;
    if (c == 2) options.exchange = ExchangeKind::kCastAllreduce;
    auto comm = Communicator::Create(std::move(*group), env.config.node_id,
                                     env.config.local_world_size, std::move(*auth), options);
    if (!ExpectOk(comm.status(), "communicator")) return;
    comms[c] = std::move(*comm);
  }
  const ExchangeKind want =
      crossing >= 3 ? ExchangeKind::kCastAllreduce : ExchangeKind::kSparseAllgather;
  Expect(comms[0]->KindFor(n) == want, absl::StrCat("picks ", ExchangeKindName(want)),
         ExchangeKindName(comms[0]->KindFor(n)));
  const int same = want == ExchangeKind::kCastAllreduce ? 2 : 1;
  bool equal = true, rounded = true;
  for (int step = 0; step < 3; ++step) {
    for (uint32_t b : {0u, 1u}) {
      const uint64_t size = b == 0 ? n : 301;
      std::vector<float> got[3];
      for (int c = 0; c < 3; ++c) {
        got[c] = Gradient(env.rank(), step, b, size, false);
        if (!ExpectOk(
                comms[c]->AllreduceMean(b, step, absl::MakeSpan(got[c]), ExchangePath::kCompressed),
                absl::StrCat("exchange ", c, " step ", step, " bucket ", b))) {
          return;
        }
      }
      // The picked exchange: the forced one's outputs and residuals.
      std::string diff =
          Differs(got[0], got[same]) + Differs(comms[0]->Residual(b), comms[same]->Residual(b));
      if (!diff.empty()) {
        Expect(false, absl::StrCat("step ", step, " bucket ", b, " as forced"), diff);
        equal = false;
      }
      if (step > 0) continue;  // the owners' residuals differ from here on
      // Step 0, from zero residuals: the cast allreduce's output is the
      // allgather's rounded to 16 bits; flat, each owner keeps what that
      // lost on its region (hierarchically, on its node's shard).
      std::vector<float> want_out(size), lost;
      RoundTo16(options_spec.method, got[1], absl::MakeSpan(want_out), &lost);
      diff = Differs(got[2], want_out);
      if (!hier) {
        std::vector<uint64_t> bounds;
        EvenRegions(size, env.world(), &bounds);
        std::vector<float> e(comms[1]->Residual(b).begin(), comms[1]->Residual(b).end());
        KeepRounding(absl::MakeSpan(e), lost, bounds[env.rank()], bounds[env.rank() + 1],
                     env.world());
        diff += Differs(comms[2]->Residual(b), e);
      }
      if (!diff.empty()) {
        Expect(false, absl::StrCat("step 0 bucket ", b, " rounded"), diff);
        rounded = false;
      }
    }
  }
  Expect(rounded, "the cast allreduce gives the allgather's average rounded to 16 bits");
  const uint64_t cast = comms[0]->totals().cast_allreduce_buckets;
  Expect(want == ExchangeKind::kCastAllreduce ? cast == 6 : cast == 0,
         "stats count the cast allreduce's buckets", absl::StrCat(cast));
  // A bucket with a small dense part (a DDP bucket's biases): it rides in
  // the allgather's frames where the model finds that cheaper than its
  // pick plus a ring of the dense part (DenseRides), else takes its own
  // ring and leaves the pick alone. Under the default model the cast
  // allreduce keeps its bucket from 4 ranks (the allgather would move
  // (P-1) 2n bytes against (P-1)/P 4n); on 3 the allgather's fewer rounds
  // win. Either way the picking communicator equals the one forced to
  // the exchange it took, bit for bit. Flat only: hierarchically the dense
  // part always goes first.
  if (!hier) {
    constexpr uint64_t kDense = 300;
    const bool rides = comms[0]->DenseRides(n, kDense);
    if (want == ExchangeKind::kSparseAllgather) {
      Expect(rides, "with the allgather picked, a dense part rides in it");
    } else if (env.world() >= 4) {
      Expect(!rides, "from 4 ranks a small dense part leaves the cast allreduce alone");
    }
    const int forced = rides ? 1 : 2;
    std::vector<float> data[3], dense[3];
    for (int c : {0, forced}) {
      data[c] = Gradient(env.rank(), 4, 7, n, false);
      dense[c] = Gradient(env.rank(), 4, 8, kDense, false);
      if (!ExpectOk(comms[c]->AllreduceMeanWithDense(7, 4, absl::MakeSpan(data[c]),
                                                     absl::MakeSpan(dense[c])),
                    absl::StrCat("with dense ", c))) {
        return;
      }
    }
    Expect((comms[0]->last_call().cast_allreduce_buckets == 1) == !rides,
           absl::StrCat("with a dense part: ", rides ? "the allgather" : "the cast allreduce"));
    const std::string diff = Differs(data[0], data[forced]) + Differs(dense[0], dense[forced]) +
                             Differs(comms[0]->Residual(7), comms[forced]->Residual(7));
    Expect(diff.empty(), "with a dense part: as forced to the exchange it took, bit for bit", diff);
  }
  Expect(equal, absl::StrCat(hier ? "hierarchical" : "flat",
                             " communicator equals the one "
                             "forced to the exchange it picks, bit for bit"));
  std::printf("INFO %s\n", comms[0]->totals().ToString().c_str());
  for (auto& c : comms) ExpectOk(c->Close(), "close");
}

void ScenarioMismatch() {
  MismatchScenario([](const std::string& spec) { return NewRig(spec, kSecret, env.config.job_id); },
                   "fp16", "bf16");
}

void ScenarioAuth() {
  const std::string kind = env.Text("kind", "tamper");
  const bool odd = env.rank() == 1;
  CastAllreduceOptions options;
  if (odd && kind == "tamper") options.corrupt_contribution_to_for_test = 0;
  if (kind != "tamper") {
    // Another secret or job: the chunk key round refuses it on every rank.
    auto group = NewGroup();
    auto auth = NewAuth(odd && kind == "secret" ? "another-secret-entirely-9876543210" : kSecret,
                        env.config.job_id + (odd && kind == "job" ? "-other" : ""));
    if (!ExpectOk(group.status(), "group") || !ExpectOk(auth.status(), "auth")) return;
    auto session = AgreeSessionAuth(**group, *auth);
    std::printf("AUTH %s\n", session.status().ToString().c_str());
    const bool want = kind == "job" ? absl::IsPermissionDenied(session.status())
                                    : absl::IsUnauthenticated(session.status());
    Expect(want, kind + " rejected on every rank", session.status().ToString());
    return;
  }
  auto rig = NewRig("bf16", kSecret, env.config.job_id, options);
  if (rig == nullptr) return;
  std::vector<float> data = Gradient(env.rank(), 3, 2, 4000, false);
  const std::vector<float> before = data;
  absl::Status s = rig->Run(2, 3, &data);
  std::printf("AUTH %s\n", s.ToString().c_str());
  Expect(absl::IsUnauthenticated(s), "tamper rejected on every rank", s.ToString());
  if (env.rank() != 0) {
    Expect(absl::StrContains(s.message(), "owner of region 0"), "names the owner that saw it",
           s.ToString());
  } else {
    Expect(absl::StrContains(s.message(), "from rank 1"), "the owner names the sender",
           s.ToString());
  }
  Expect(data == before, "data unchanged");
}

void ScenarioFault() {
  FaultScenario([](const std::string& spec) { return NewRig(spec, kSecret, env.config.job_id); },
                "fp16");
}

int Main(int argc, char** argv) {
  return RunScenario(argc, argv,
                     {{"reference", ScenarioReference},
                      {"communicator", ScenarioCommunicator},
                      {"mismatch", ScenarioMismatch},
                      {"auth", ScenarioAuth},
                      {"fault", ScenarioFault}});
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) { return gradwire::Main(argc, argv); }
