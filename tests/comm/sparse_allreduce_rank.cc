// One rank of the sparse allreduce tests (driven by sparse_allreduce_test.py
// through tools/launch.py; every rank is its own process on loopback).
//
//   sparse_allreduce_rank <scenario> [key=value ...]
//
// Scenarios:
//   collectives  transport/sparse_collectives.h: sum/min/max allreduces of
//                u32 and u64 vectors, bounded alltoallv and allgatherv with
//                uneven and empty blocks, their byte counts, and a block
//                over its cap refused (group poisoned) before it is sent.
//   selection    SelectGlobalTopK over keys spread across the ranks (ties
//                in magnitude, so the index bits decide) against a sort of
//                every rank's keys, for k from 1 to past the candidates.
//   reference    SparseAllreduce::Run for every spec in specs=a;b, every
//                size in sizes=..., steps=N steps: the output and the
//                residual must equal, bit for bit, the CPU reference
//                computed here (each rank's input is a function of (rank,
//                step, bucket), so every rank can encode every rank's frame
//                itself), and g + e_old == share + e_new must hold exactly.
//                plan=uneven: every bucket starts from a region plan with
//                empty and uneven regions; balance=0 keeps even regions.
//                data=dyadic (multiples of 1/256: many ties) or smooth.
//   mismatch     kind=length|spec|step: the last rank disagrees; every rank
//                gets InvalidArgument "collective mismatch" naming it, with
//                `out` unchanged.
//   auth         kind=secret|job: rank 1 signs with another secret / job
//                (every rank rejects something); kind=tamper: rank 1
//                flips a bit of its contribution to rank 0 only, so only
//                rank 0 can see it and the others learn it from rank 0's
//                failure notice. Every rank must fail, `out` unchanged.
//   communicator the Communicator picks the exchange per bucket by its cost
//                model (flat, or hier=1): large buckets through the sparse
//                allreduce, small ones the allgather; bit for bit.
//   fault        the last rank exits before step 1; the others must fail
//                with Unavailable / DeadlineExceeded within 2x the deadline.
// Any scenario: direct_max=0 makes the groups gather as above 16 ranks (Gloo's
// ring), so the exchange agrees by recursive doubling.
// Output: "CHECK <name> ok|FAILED <why>" lines; exit 0 iff all passed.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/global_selection.h"
#include "gradwire/lib/comm/sparse_allreduce.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gradwire/transport/sparse_collectives.h"
#include "tests/comm/rank_env.h"
#include "tests/comm/rank_setup.h"

namespace gradwire {
namespace {

using transport::GlooGroup;
using transport::ReduceOp;
using transport::SparseCollectives;

constexpr char kSecret[] = "sparse-allreduce-test-secret-0123456789";

// What one exchange needs, at stable addresses (the exchange keeps
// references to the codec and the authenticator).
struct Rig {
  std::unique_ptr<GlooGroup> group;
  std::unique_ptr<FrameAuthenticator> auth;
  std::unique_ptr<Codec> codec;
  std::unique_ptr<ErrorFeedback> ef;
  std::unique_ptr<SparseAllreduce> exchange;

  absl::Status Run(uint32_t bucket, uint64_t step, std::vector<float>* data) {
    return exchange->Run(*group, *ef, absl::StrCat(bucket), bucket, step, *data,
                         absl::MakeSpan(*data), env.world(), nullptr);
  }
};

// Null (after a failed check) if any part cannot be made.
std::unique_ptr<Rig> NewRig(const std::string& spec_text, const std::string& secret,
                            const std::string& job,
                            const SparseAllreduceOptions& options = SparseAllreduceOptions()) {
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
  rig->codec = *MakeCodec(spec->ForSender(env.rank()));
  rig->ef = std::make_unique<ErrorFeedback>(*rig->codec);
  rig->exchange = std::make_unique<SparseAllreduce>(*rig->codec, *rig->auth, options);
  return rig;
}

// ------------------------------------------------------------ collectives

void ScenarioCollectives() {
  auto group = NewGroup();
  if (!ExpectOk(group.status(), "group")) return;
  GlooGroup& g = **group;
  const int p = env.world(), me = env.rank();
  for (int len : {1, 3, 300}) {
    std::vector<uint32_t> sum(len), lo(len), hi(len);
    std::vector<uint64_t> wide(len);
    for (int i = 0; i < len; ++i) {
      sum[i] = lo[i] = hi[i] = static_cast<uint32_t>(Mix(me * 1000 + i) % 100000);
      wide[i] = Mix(me * 7 + i) >> 4;
    }
    const std::string at = absl::StrCat(" (", len, " elements)");
    ExpectOk(SparseCollectives::AllreduceU32(g, absl::MakeSpan(sum), ReduceOp::kSum), "sum" + at);
    ExpectOk(SparseCollectives::AllreduceU32(g, absl::MakeSpan(lo), ReduceOp::kMin), "min" + at);
    ExpectOk(SparseCollectives::AllreduceU32(g, absl::MakeSpan(hi), ReduceOp::kMax), "max" + at);
    ExpectOk(SparseCollectives::AllreduceU64(g, absl::MakeSpan(wide), ReduceOp::kMin),
             "u64 min" + at);
    std::string wrong;
    for (int i = 0; i < len && wrong.empty(); ++i) {
      uint32_t want_sum = 0, want_lo = ~0u, want_hi = 0;
      uint64_t want_wide = ~uint64_t{0};
      for (int r = 0; r < p; ++r) {
        const uint32_t v = static_cast<uint32_t>(Mix(r * 1000 + i) % 100000);
        want_sum += v;
        want_lo = std::min(want_lo, v);
        want_hi = std::max(want_hi, v);
        want_wide = std::min(want_wide, Mix(r * 7 + i) >> 4);
      }
      if (sum[i] != want_sum || lo[i] != want_lo || hi[i] != want_hi || wide[i] != want_wide) {
        wrong = absl::StrCat("element ", i, ": sum ", sum[i], " vs ", want_sum, ", min ", lo[i],
                             " vs ", want_lo, ", max ", hi[i], " vs ", want_hi);
      }
    }
    Expect(wrong.empty(), "allreduce values" + at, wrong);
    // Recursive doubling: each rank sends the vector ceil(log2 P) times
    // (folded ranks once, their partners twice more).
    int rounds = 0;
    while ((1 << rounds) < p) ++rounds;
    const uint64_t bytes = g.last_call().bytes_sent;
    Expect(p == 1 || (bytes >= uint64_t(len) * 8 && bytes <= uint64_t(len) * 8 * (rounds + 1)),
           "allreduce bytes are O(log P) vectors" + at, g.last_call().ToString());
    // A large vector (up to 16 ranks: direct reduce-scatter + allgather;
    // from 8 on otherwise: halving and doubling) moves 2 (P-1)/P of it.
    const bool direct = p <= env.Number("direct_max", 16);
    if (len * 8 >= SparseCollectives::kHalvingMinBytes && p > 1 &&
        (direct || SparseCollectives::UsesHalving(p, len * 8))) {
      Expect(bytes <= 2 * uint64_t(len) * 8 * (p - 1) / p + 16 * p,
             "a large allreduce moves 2 (P-1)/P of the vector" + at, g.last_call().ToString());
    }
  }
  // Bounded alltoallv: r sends (3r + 5j) % 11 bytes to j (some empty);
  // with the group's receive window, and with windows of 1 and 2, where
  // sends and receives go in waves (every rank past the first waves waits
  // on its peers' later sends: a schedule that deadlocked would hit the
  // deadline here).
  auto size_of = [](int r, int j) { return static_cast<uint64_t>((3 * r + 5 * j) % 11); };
  std::vector<std::vector<uint8_t>> mine(p);
  std::vector<absl::Span<const uint8_t>> blocks(p), got(p);
  std::vector<uint64_t> caps(p, 11);
  for (int j = 0; j < p; ++j) {
    for (uint64_t b = 0; b < size_of(me, j); ++b) mine[j].push_back(uint8_t(me * 31 + j * 7 + b));
    blocks[j] = mine[j];
  }
  std::vector<uint8_t> scratch;
  for (const std::optional<int> window :
       {std::optional<int>(), std::optional<int>(1), std::optional<int>(2)}) {
    const std::string at =
        " (receive window " + (window ? std::to_string(*window) : "default") + ")";
    for (auto& g_r : got) g_r = {};
    if (!ExpectOk(SparseCollectives::AlltoallvBounded(g, blocks, caps, &scratch,
                                                      absl::MakeSpan(got), window),
                  "alltoallv" + at)) {
      return;
    }
    bool right = true;
    uint64_t want_in = 0;
    for (int r = 0; r < p; ++r) {
      right = right && got[r].size() == size_of(r, me);
      for (uint64_t b = 0; right && b < got[r].size(); ++b) {
        right = got[r][b] == uint8_t(r * 31 + me * 7 + b);
      }
      if (r != me) want_in += 8 + size_of(r, me);
    }
    Expect(right, "alltoallv blocks" + at);
    Expect(g.last_call().bytes_received == want_in, "alltoallv bytes" + at,
           g.last_call().ToString());
  }
  // Bounded allgatherv (Bruck): r's block has (5r + 2) % 9 bytes.
  std::vector<uint8_t> own;
  for (int b = 0; b < (5 * me + 2) % 9; ++b) own.push_back(uint8_t(me + 100 * b));
  uint64_t total = 0;
  for (int r = 0; r < p; ++r) total += (5 * r + 2) % 9;
  std::vector<uint64_t> gather_caps(p, 8);
  if (!ExpectOk(SparseCollectives::AllgathervBounded(g, own, gather_caps, total, &scratch,
                                                     absl::MakeSpan(got)),
                "allgatherv")) {
    return;
  }
  bool right = true;
  for (int r = 0; r < p; ++r) {
    right = right && got[r].size() == static_cast<uint64_t>((5 * r + 2) % 9);
    for (size_t b = 0; right && b < got[r].size(); ++b) right = got[r][b] == uint8_t(r + 100 * b);
  }
  Expect(right, "allgatherv blocks");
  Expect(g.last_call().bytes_received == total - own.size() + 8 * (p - 1),
         "allgatherv: every other block received once", g.last_call().ToString());
  // A block over its cap never reaches the wire: refused on every rank
  // (each passes one), and the group is poisoned.
  std::vector<uint8_t> big(9);
  absl::Status over = SparseCollectives::AllgathervBounded(g, big, gather_caps, total + 9, &scratch,
                                                           absl::MakeSpan(got));
  Expect(absl::IsInvalidArgument(over) && absl::StrContains(over.message(), "cap"),
         "over-cap block refused", over.ToString());
  std::vector<uint32_t> one(1);
  absl::Status after = SparseCollectives::AllreduceU32(g, absl::MakeSpan(one), ReduceOp::kSum);
  Expect(absl::IsFailedPrecondition(after), "poisoned after the refusal", after.ToString());
}

// -------------------------------------------------------------- selection

void ScenarioSelection() {
  auto group = NewGroup();
  if (!ExpectOk(group.status(), "group")) return;
  const int p = env.world();
  // Rank r holds the indices i = r (mod P) below 3000 whose hash keeps
  // them; values come from 40 magnitudes (and a NaN, an Inf, a zero).
  auto keys_of = [p](int r) {
    std::vector<uint64_t> keys;
    for (uint64_t i = r; i < 3000; i += p) {
      const uint64_t h = Mix(i * 3 + 1);
      if (h % 3 == 0) continue;
      float v = static_cast<float>(h % 40) * 0.25f - 5.0f;
      if (i == 17) v = kernels::BitsFloat(0x7fc00000u);   // NaN: lowest
      if (i == 29) v = -kernels::BitsFloat(0x7f800000u);  // -Inf: highest
      keys.push_back(SelectionKey(v, i));
    }
    return keys;
  };
  std::vector<uint64_t> all;
  for (int r = 0; r < p; ++r) {
    std::vector<uint64_t> k = keys_of(r);
    all.insert(all.end(), k.begin(), k.end());
  }
  const std::vector<uint64_t> mine = keys_of(env.rank());
  std::vector<uint32_t> counts;
  for (uint64_t band : {uint64_t{0}, uint64_t{40}}) {
    for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{37}, uint64_t{500},
                       uint64_t(all.size() - 1), uint64_t(all.size()), uint64_t(all.size() + 5)}) {
      auto got = SelectGlobalTopK(**group, mine, k, band, &counts, nullptr);
      const std::string name = absl::StrCat("global top-", k, " band ", band);
      if (!ExpectOk(got.status(), name)) return;
      const GlobalSelection want = SelectTopKLocally(all, k);
      // What goes on: `kept` keys, at most `band` more than the survivors;
      // their best `survivors` are exactly the reference's.
      std::vector<uint64_t> kept;
      for (uint64_t key : all) {
        if (key >= got->threshold) kept.push_back(key);
      }
      const uint64_t cut = SelectTopKLocally(kept, got->survivors).threshold;
      bool same = kept.size() == got->kept && got->candidates == all.size() &&
                  got->survivors == want.survivors &&
                  got->kept <= got->survivors + (got->kept > got->survivors ? band : 0);
      uint64_t above_band = 0;
      for (uint64_t key : all) {
        same = same && (key >= got->threshold && key >= cut) == (key >= want.threshold);
        // Past the band's end every key survives.
        if (key >= got->band_end) {
          ++above_band;
          same = same && key >= want.threshold;
        }
      }
      same = same && got->band_end >= got->threshold &&
             (got->kept > got->survivors ? above_band < got->survivors
                                         : got->band_end == got->threshold);
      Expect(same, name + " selects the reference's set",
             absl::StrCat("kept ", got->kept, " (", kept.size(), "), survivors ", got->survivors,
                          " vs ", want.survivors, " of ", all.size()));
      Expect(got->rounds >= 1 && got->rounds <= 9, name + " rounds", absl::StrCat(got->rounds));
    }
  }
}

// -------------------------------------------------------------- reference

// Every rank's exchange computed in one process: the definition in
// sparse_allreduce.h, written out without regions or rounds.
class Reference {
 public:
  // `encoders`: ranks that encode (one codec and residual each).
  Reference(const CompressionSpec& spec, int encoders) : spec_(spec) {
    for (int r = 0; r < encoders; ++r) {
      codecs_.push_back(*MakeCodec(spec.ForSender(r)));
      efs_.push_back(std::make_unique<ErrorFeedback>(*codecs_.back()));
    }
  }

  // One exchange of bucket `bucket` at `step`: sender s encodes inputs[s]
  // with encoder encoders[s]'s residual; returns sum / divisor over the
  // survivors. `share` gets sender `me`'s delivered entries (0 elsewhere).
  // reselect = false: the sparse allgather (every entry survives).
  std::vector<float> Exchange(uint32_t bucket, uint64_t step,
                              const std::vector<std::vector<float>>& inputs,
                              const std::vector<int>& encoders, float divisor, int me,
                              std::vector<float>* share, bool reselect = true) {
    const std::string key = absl::StrCat(bucket);
    const uint64_t n = inputs[0].size();
    const int senders = inputs.size();
    std::vector<std::vector<float>> decoded(senders, std::vector<float>(n, 0.0f));
    std::vector<float> sum(n, 0.0f);
    for (int s = 0; s < senders; ++s) {
      const Codec& codec = *codecs_[encoders[s]];
      std::vector<uint8_t> frame(codec.MaxEncodedBytes(n));
      auto enc = efs_[encoders[s]]->Encode(key, inputs[s], step, absl::MakeSpan(frame));
      MustSucceed(enc.status());
      const auto bytes = absl::MakeConstSpan(frame.data(), enc->frame_bytes);
      MustSucceed(codec.DecodeAccumulate(bytes, absl::MakeSpan(decoded[s])));
      MustSucceed(codec.DecodeAccumulate(bytes, absl::MakeSpan(sum)));
    }
    std::vector<uint32_t> order;
    for (uint64_t i = 0; i < n; ++i) {
      if ((kernels::FloatBits(sum[i]) & 0x7fffffffu) != 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const uint32_t ka = kernels::MagnitudeKey(sum[a]), kb = kernels::MagnitudeKey(sum[b]);
      return ka != kb ? ka > kb : a < b;
    });
    if (reselect) order.resize(std::min<uint64_t>(order.size(), spec_.SelectedCount(n)));
    std::vector<bool> survives(n, false);
    for (uint32_t i : order) survives[i] = true;
    std::vector<float> out(n, 0.0f);
    for (uint32_t i : order) out[i] = sum[i] / divisor;
    share->assign(n, 0.0f);
    for (int s = 0; s < senders; ++s) {
      std::vector<uint32_t> idx;
      std::vector<float> val;
      for (uint64_t i = 0; i < n; ++i) {
        if ((kernels::FloatBits(decoded[s][i]) & 0x7fffffffu) == 0) continue;
        if (survives[i] || !reselect) {  // the allgather keeps what cancelled, too
          if (s == me) (*share)[i] = decoded[s][i];
          continue;
        }
        idx.push_back(i);
        val.push_back(decoded[s][i]);
      }
      MustSucceed(efs_[encoders[s]]->GiveBack(key, idx, val));
    }
    return out;
  }

  absl::Span<const float> Residual(int encoder, uint32_t bucket) const {
    return efs_[encoder]->Residual(absl::StrCat(bucket));
  }

 private:
  // Not a test failure but a broken harness: stop loudly.
  static void MustSucceed(const absl::Status& s) {
    if (!s.ok()) {
      std::printf("SETUP reference: %s\n", s.ToString().c_str());
      std::exit(2);
    }
  }
  const CompressionSpec spec_;
  std::vector<std::unique_ptr<Codec>> codecs_;
  std::vector<std::unique_ptr<ErrorFeedback>> efs_;
};

// The flat exchange of every rank's Gradient().
std::vector<float> FlatReference(Reference& ref, uint32_t bucket, uint64_t step, uint64_t n,
                                 bool dyadic, std::vector<float>* share) {
  std::vector<std::vector<float>> inputs;
  std::vector<int> encoders;
  for (int r = 0; r < env.world(); ++r) {
    inputs.push_back(Gradient(r, step, bucket, n, dyadic));
    encoders.push_back(r);
  }
  return ref.Exchange(bucket, step, inputs, encoders, env.world(), env.rank(), share);
}

// Uneven regions with empty ones: weights 0, 1, 2, 0, 1, 2, ...
std::vector<uint64_t> UnevenPlan(uint64_t n, int p) {
  std::vector<uint64_t> bounds(p + 1, 0);
  uint64_t weight = 0, total = 0;
  for (int j = 0; j < p; ++j) total += j % 3;
  for (int j = 0; j < p; ++j) {
    weight += j % 3;
    bounds[j + 1] = total == 0 ? n : n * weight / total;
  }
  bounds[p] = n;
  return bounds;
}

void ScenarioReference() {
  const int steps = env.Number("steps", 3);
  const bool dyadic = env.Text("data", "dyadic") == "dyadic";
  SparseAllreduceOptions options;
  options.balance_regions = env.Number("balance", 1) != 0;
  std::vector<uint64_t> sizes;
  for (absl::string_view s : absl::StrSplit(env.Text("sizes", "0,1,7,1000,4099"), ',')) {
    uint64_t v;
    if (absl::SimpleAtoi(s, &v)) sizes.push_back(v);
  }
  auto auth = NewAuth(kSecret, env.config.job_id);
  if (!ExpectOk(auth.status(), "auth")) return;
  for (absl::string_view text : absl::StrSplit(env.Text("specs", "topk:ratio=0.01"), ';')) {
    auto spec = CompressionSpec::Parse(text);
    if (!ExpectOk(spec.status(), absl::StrCat("parse ", text))) continue;
    auto group = NewGroup();
    if (!ExpectOk(group.status(), "group")) return;
    auto codec = MakeCodec(spec->ForSender(env.rank()));
    if (!ExpectOk(codec.status(), "codec")) return;
    ErrorFeedback ef(**codec);
    SparseAllreduce exchange(**codec, *auth, options);
    Reference ref(*spec, env.world());
    if (env.Text("plan", "") == "uneven") {
      for (uint32_t b = 0; b < sizes.size(); ++b) {
        ExpectOk(exchange.SetRegions(b, UnevenPlan(sizes[b], env.world())), "plan");
      }
    }
    bool all_equal = true, invariant = true;
    uint64_t dense_frames = 0, rounds = 0, empty_regions = 0, uneven = 0;
    ExchangeStats stats;
    for (int step = 0; step < steps; ++step) {
      for (uint32_t b = 0; b < sizes.size(); ++b) {
        const uint64_t n = sizes[b];
        const std::string name = absl::StrCat(text, " step ", step, " n=", n);
        const std::vector<float> g = Gradient(env.rank(), step, b, n, dyadic);
        const std::vector<float> e_old(ef.Residual(absl::StrCat(b)).begin(),
                                       ef.Residual(absl::StrCat(b)).end());
        std::vector<float> data = g;
        absl::Status s = exchange.Run(**group, ef, absl::StrCat(b), b, step, data,
                                      absl::MakeSpan(data), env.world(), &stats);
        if (!ExpectOk(s, name + " status")) return;
        std::vector<float> share;
        const std::vector<float> want = FlatReference(ref, b, step, n, dyadic, &share);
        std::string diff = Differs(data, want);
        const absl::Span<const float> e_new = ef.Residual(absl::StrCat(b));
        if (diff.empty()) diff = Differs(e_new, ref.Residual(env.rank(), b));
        if (!diff.empty()) {
          Expect(false, name + " bitwise", diff);
          all_equal = false;
        }
        // g + e_old == share + e_new, element by element, bit for bit.
        for (uint64_t i = 0; i < n && spec->UsesErrorFeedback(); ++i) {
          const float acc = g[i] + (e_old.empty() ? 0.0f : e_old[i]);
          if (!kernels::IsFinite(acc)) continue;
          if (kernels::FloatBits(acc) != kernels::FloatBits(share[i] + e_new[i])) {
            Expect(false, name + " error feedback",
                   absl::StrFormat("element %d: g + e_old = %.9g, share %.9g + e_new %.9g", i, acc,
                                   share[i], e_new[i]));
            invariant = false;
            break;
          }
        }
        const SparseAllreduceInfo& info = exchange.last_run();
        dense_frames += info.dense_frames_sent;
        rounds = std::max<uint64_t>(rounds, info.selection_rounds);
        for (size_t j = 0; j + 1 < info.bounds.size(); ++j) {
          empty_regions += info.bounds[j + 1] == info.bounds[j] && n > 0;
          uneven += info.bounds[j + 1] - info.bounds[j] != info.bounds[1] - info.bounds[0];
        }
      }
    }
    Expect(all_equal, absl::StrCat(text, " equals the CPU reference"));
    Expect(invariant, absl::StrCat(text, " g + e_old == share + e_new"));
    std::printf(
        "INFO %s: dense frames %d, max selection rounds %d, empty regions %d, "
        "uneven %d; %s\n",
        std::string(text).c_str(), static_cast<int>(dense_frames), static_cast<int>(rounds),
        static_cast<int>(empty_regions), static_cast<int>(uneven), stats.ToString().c_str());
    // Random-k's implied layout is never larger than a dense one.
    if (env.Number("expect_dense", 0) && spec->method != Method::kRandomK) {
      Expect(dense_frames > 0, "SparCML switch used a dense frame");
    }
    if (env.Text("plan", "") == "uneven" || env.Number("expect_uneven", 0)) {
      Expect(uneven > 0 && (env.Text("plan", "") != "uneven" || empty_regions > 0),
             "uneven (and empty) regions exercised");
    }
    ExpectOk((*group)->Close(), "close");
  }
}

// ------------------------------------------------------------ communicator

// Communicator (flat, or hier=1: nodes from LOCAL_WORLD_SIZE) with a slow
// link in its cost model, so that a large compressed bucket takes the
// sparse allreduce (flat, or the cross-node stage), a dense enough spec
// the ring, a small bucket the allgather. Every result against the CPU
// reference; then a GradientExchanger bucket that the model sends through
// the sparse allreduce (so not staged) against the same. exchange=
// sparse_allreduce / sparse_allgather forces that exchange on every bucket
// (CommunicatorOptions::exchange), against the same reference.
void ScenarioCommunicator() {
  const bool hier = env.Number("hier", 0) != 0;
  const int world = env.world();
  const int local = hier ? env.config.local_world_size : 1;
  const int nodes = world / local;
  const uint64_t n = env.Number("n", 60000);
  auto spec = CompressionSpec::Parse(env.Text("spec", "topk:ratio=0.05"));
  auto group = NewGroup();
  auto auth = NewAuth(kSecret, env.config.job_id);
  if (!ExpectOk(group.status(), "group") || !ExpectOk(auth.status(), "auth")) return;
  CommunicatorOptions options;
  options.compression = *spec;
  options.hierarchical = hier;
  options.exchange_model.bytes_per_second = 1e6;
  options.exchange_model.seconds_per_round = 1e-6;
  const std::string forced = env.Text("exchange", "auto");
  if (forced == "sparse_allreduce") options.exchange = ExchangeKind::kSparseAllreduce;
  if (forced == "sparse_allgather") options.exchange = ExchangeKind::kSparseAllgather;
  auto comm = Communicator::Create(std::move(*group), env.config.node_id,
                                   env.config.local_world_size, std::move(*auth), options);
  if (!ExpectOk(comm.status(), "communicator")) return;
  Communicator& c = **comm;
  Expect(c.ModelKindFor(n) == ExchangeKind::kSparseAllreduce, "large bucket: sparse allreduce",
         ExchangeKindName(c.ModelKindFor(n)));
  Expect(c.ModelKindFor(200) == ExchangeKind::kSparseAllgather, "small bucket: sparse allgather",
         ExchangeKindName(c.ModelKindFor(200)));
  for (uint64_t size : {n, uint64_t{200}}) {
    const std::string want = forced == "auto" ? ExchangeKindName(c.ModelKindFor(size)) : forced;
    Expect(ExchangeKindName(c.KindFor(size)) == want, absl::StrCat(size, " elements take ", want),
           ExchangeKindName(c.KindFor(size)));
  }
  uint64_t reselected = 0;
  if (!hier) {
    auto dense = CompressionSpec::Parse("topk:ratio=0.9,indices=raw");
    Expect(ChooseExchange(world, n, *dense, c.exchange_model()) == ExchangeKind::kDenseRing,
           "dense enough: the ring");
  }
  Reference ref(*spec, world);
  const uint64_t shard = (n + local - 1) / local;
  bool equal = true;
  for (int step = 0; step < 3; ++step) {
    for (uint32_t b : {0u, 1u}) {
      const uint64_t size = b == 0 ? n : 200;
      std::vector<float> data = Gradient(env.rank(), step, b, size, true);
      if (!ExpectOk(c.AllreduceMean(b, step, absl::MakeSpan(data), ExchangePath::kCompressed),
                    absl::StrCat("exchange step ", step, " bucket ", b))) {
        return;
      }
      // Reference: per shard q, senders = nodes (their dyadic sums are
      // exact), encoded by the node's rank q.
      std::vector<float> want(size, 0.0f), share;
      const uint64_t sh = hier ? (size + local - 1) / local : size;
      for (int q = 0; q < local; ++q) {
        const uint64_t begin = std::min<uint64_t>(size, q * sh);
        const uint64_t len = std::min<uint64_t>(sh, size - begin);
        std::vector<std::vector<float>> inputs(nodes, std::vector<float>(len, 0.0f));
        std::vector<int> encoders;
        for (int s = 0; s < nodes; ++s) {
          for (int l = 0; l < local; ++l) {
            const std::vector<float> g = Gradient(s * local + l, step, b, size, true);
            for (uint64_t i = 0; i < len; ++i) inputs[s][i] += g[begin + i];
          }
          encoders.push_back(s * local + q);
        }
        const bool reselect = c.KindFor(size) == ExchangeKind::kSparseAllreduce;
        if (q == 0 && reselect) ++reselected;
        const std::vector<float> part =
            ref.Exchange(b, step, inputs, encoders, world, env.rank() / local, &share, reselect);
        std::copy(part.begin(), part.end(), want.begin() + begin);
      }
      const std::string diff = Differs(data, want);
      if (!diff.empty()) {
        Expect(false, absl::StrCat("step ", step, " bucket ", b, " bitwise"), diff);
        equal = false;
      }
    }
  }
  (void)shard;
  Expect(c.totals().sparse_allreduce_buckets == reselected,
         "stats count the sparse allreduce's buckets",
         absl::StrCat(c.totals().sparse_allreduce_buckets, " vs ", reselected));
  Expect(equal, absl::StrCat(hier ? "hierarchical" : "flat", " communicator equals the reference"));
  std::printf("INFO %s\n", c.totals().ToString().c_str());
  ExpectOk(c.Close(), "close");
}

// ---------------------------------------------------------------- failures

void ScenarioMismatch() {
  MismatchScenario([](const std::string& spec) { return NewRig(spec, kSecret, env.config.job_id); },
                   "topk:ratio=0.01", "topk:ratio=0.02");
}

void ScenarioAuth() {
  const std::string kind = env.Text("kind", "secret");
  const bool odd = env.rank() == 1;
  SparseAllreduceOptions options;
  if (odd && kind == "tamper") {
    options.corrupt_contribution_to_for_test = 0;
    options.corrupt_runs_for_test = 1;
  }
  auto rig = NewRig(env.Text("spec", "topk:ratio=0.05"),
                    odd && kind == "secret" ? "another-secret-entirely-9876543210" : kSecret,
                    env.config.job_id + (odd && kind == "job" ? "-other" : ""), options);
  if (rig == nullptr) return;
  std::vector<float> data = Gradient(env.rank(), 3, 2, 4000, false);
  const std::vector<float> before = data;
  absl::Status s = rig->Run(2, 3, &data);
  std::printf("AUTH %s\n", s.ToString().c_str());
  const bool want = kind == "job" ? absl::IsPermissionDenied(s) : absl::IsUnauthenticated(s);
  Expect(want, kind + " rejected on every rank", s.ToString());
  if (kind == "tamper" && env.rank() != 0) {
    Expect(absl::StrContains(s.message(), "owner of region 0"), "names the owner that saw it",
           s.ToString());
  }
  Expect(data == before, "data unchanged");
  if (kind == "tamper") {
    // The owner of region 0 stopped half way through its sums; the next
    // Run of the same exchange (no forgery now) starts from none of them:
    // an all-zero gradient averages to zeros.
    std::vector<float> zeros(4000, 0.0f);
    s = rig->Run(7, 4, &zeros);
    Expect(s.ok(), "the next run succeeds", s.ToString());
    const auto stale = std::find_if(zeros.begin(), zeros.end(), [](float v) { return v != 0.0f; });
    Expect(
        stale == zeros.end(), "the next run holds nothing of the failed one",
        stale == zeros.end() ? "" : absl::StrCat("element ", stale - zeros.begin(), " = ", *stale));
  }
}

void ScenarioFault() {
  FaultScenario([](const std::string& spec) { return NewRig(spec, kSecret, env.config.job_id); },
                "topk:ratio=0.01");
}

int Main(int argc, char** argv) {
  return RunScenario(argc, argv,
                     {{"collectives", ScenarioCollectives},
                      {"selection", ScenarioSelection},
                      {"reference", ScenarioReference},
                      {"communicator", ScenarioCommunicator},
                      {"mismatch", ScenarioMismatch},
                      {"auth", ScenarioAuth},
                      {"fault", ScenarioFault}});
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) { return gradwire::Main(argc, argv); }
