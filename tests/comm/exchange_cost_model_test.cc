// The cost model's formulas and choices (lib/comm/exchange_cost_model.h),
// and its agreement over ranks on threads.
#include "gradwire/lib/comm/exchange_cost_model.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/comm/host_cores.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

CompressionSpec Spec(const char* text) { return *CompressionSpec::Parse(text); }

// The sparse allreduce's bytes per rank stay O(k) as P grows; the
// allgather's grow with P; the ring's approach 8n.
TEST(ExchangeCostModel, BytesScaleAsDesigned) {
  const ExchangeModel model;
  const CompressionSpec spec = Spec("topk:ratio=0.01");
  const uint64_t n = 4 << 20;
  auto bytes = [&](ExchangeKind kind, int p) {
    return EstimateExchange(kind, p, n, spec, model).bytes_received;
  };
  // (P-1)/P alone makes P = 16 1.25x P = 4, and P = 64 1.31x.
  EXPECT_LT(bytes(ExchangeKind::kSparseAllreduce, 16),
            1.3 * bytes(ExchangeKind::kSparseAllreduce, 4));
  EXPECT_LT(bytes(ExchangeKind::kSparseAllreduce, 64),
            1.4 * bytes(ExchangeKind::kSparseAllreduce, 4));
  EXPECT_GT(bytes(ExchangeKind::kSparseAllgather, 64),
            15 * bytes(ExchangeKind::kSparseAllgather, 4));
  EXPECT_NEAR(bytes(ExchangeKind::kDenseRing, 64), 2.0 * 63 / 64 * 4 * n, 64 * 80);
  // Never more than a dense ring (plus framing), whatever the density.
  const CompressionSpec full = Spec("topk:ratio=1,indices=raw");
  EXPECT_LT(EstimateExchange(ExchangeKind::kSparseAllreduce, 16, n, full, model).bytes_received,
            1.01 * bytes(ExchangeKind::kDenseRing, 16));
}

TEST(ExchangeCostModel, RoundsAreLogarithmic) {
  const ExchangeModel model;
  const CompressionSpec spec = Spec("topk:ratio=0.01");
  auto rounds = [&](ExchangeKind kind, int p) {
    return EstimateExchange(kind, p, 1 << 22, spec, model).rounds;
  };
  // L + D + R (2 log2 P) + log2 P with R = 3 selection rounds at this k
  // and D = 8 waves of the reduce-scatter's receive window from P = 33.
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllreduce, 64), 6 + 8 + 3 * 12 + 6);
  EXPECT_EQ(
      rounds(ExchangeKind::kSparseAllreduce, 256) - rounds(ExchangeKind::kSparseAllreduce, 64),
      2 + 3 * 4 + 2);
  // Up to 16 ranks the window is 4 sources: ceil((P - 1) / 4) waves. The
  // allgather's descriptors ride in its bounded blocks after a bucket's
  // first exchange (sparse_allgather.h): no agreement round.
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 16), 4);
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 5), 1);
  // The gather is a ring above 16; GlooGroup agrees in one direct round.
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 64), 63);
  EXPECT_EQ(rounds(ExchangeKind::kDenseRing, 64), 1 + 126);
  EXPECT_EQ(EstimateExchange(ExchangeKind::kSparseAllreduce, 64, 1 << 22,
                             Spec("randomk:ratio=0.01"), model)
                .rounds,
            6 + 8 + 6);
}

// Any int rank count gets an answer: finite figures and a choice, no
// endless loop (a step count's 32-bit shift once overflowed from 2^30).
TEST(ExchangeCostModel, HugeRankCountsEnd) {
  const ExchangeModel model;
  for (const char* text : {"topk:ratio=0.01", "randomk:ratio=0.001", "qsgd:bits=4", "fp16"}) {
    const CompressionSpec spec = Spec(text);
    for (int p : {1 << 30, (1 << 30) + 1, 2147483647}) {
      for (ExchangeKind kind : kExchangeKinds) {
        if (kind == ExchangeKind::kSparseAllreduce && !spec.SelectsEntries()) continue;
        if (kind == ExchangeKind::kCastAllreduce && !spec.CastsTo16Bits()) continue;
        const ExchangeCost c = EstimateExchange(kind, p, 1 << 20, spec, model);
        EXPECT_TRUE(std::isfinite(c.seconds()))
            << text << " " << ExchangeKindName(kind) << " " << p;
        EXPECT_GT(c.rounds, 30) << text << " " << ExchangeKindName(kind) << " " << p;
      }
      ChooseExchange(p, 1 << 20, spec, model);
    }
  }
}

TEST(ExchangeCostModel, Choices) {
  ExchangeModel slow;  // 1 Gbit/s
  slow.bytes_per_second = 1.25e8;
  const CompressionSpec topk = Spec("topk:ratio=0.01");
  // Few ranks: the allgather's two rounds win; many: the allreduce.
  EXPECT_EQ(ChooseExchange(2, 1 << 20, topk, slow), ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(64, 1 << 22, topk, slow), ExchangeKind::kSparseAllreduce);
  // Dense enough, or a fast link and a small bucket: the ring.
  EXPECT_EQ(ChooseExchange(16, 1 << 20, Spec("topk:ratio=0.9,indices=raw"), slow),
            ExchangeKind::kDenseRing);
  ExchangeModel fast;
  fast.bytes_per_second = 1.25e11;
  EXPECT_EQ(ChooseExchange(8, 1 << 20, topk, fast), ExchangeKind::kDenseRing);
  // Codecs that send every element: the allgather while its frames are
  // smaller than the ring's bytes, never the sparse allreduce.
  EXPECT_EQ(ChooseExchange(64, 1 << 22, Spec("qsgd:bits=4"), slow), ExchangeKind::kDenseRing);
  EXPECT_EQ(ChooseExchange(4, 1 << 22, Spec("qsgd:bits=4"), slow), ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(8, 1 << 22, Spec("sign"), slow), ExchangeKind::kSparseAllgather);
  // The casts: the allgather on 2 ranks (a tie with the cast allreduce's
  // (P-1)/P 4n bytes), the cast allreduce from 3 (the allgather's (P-1) 2n
  // is 4n there), never the ring.
  EXPECT_EQ(ChooseExchange(2, 1 << 22, Spec("fp16"), slow), ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(3, 1 << 22, Spec("fp16"), slow), ExchangeKind::kCastAllreduce);
  EXPECT_EQ(ChooseExchange(4, 1 << 22, Spec("bf16"), slow), ExchangeKind::kCastAllreduce);
  EXPECT_EQ(ChooseExchange(256, 1 << 22, Spec("fp16"), fast), ExchangeKind::kCastAllreduce);
  EXPECT_EQ(ChooseExchange(4, 1 << 22, Spec("none"), slow), ExchangeKind::kDenseRing);
  // By bytes alone: the default rates (or a slow decode) would otherwise
  // send every quantizer by the ring on a fast link.
  ExchangeModel slow_decode = fast;
  slow_decode.decoded_entries_per_second = 1e6;
  EXPECT_EQ(ChooseExchange(4, 1 << 22, Spec("sign"), slow_decode), ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(4, 1 << 22, Spec("qsgd:bits=8"), ExchangeModel()),
            ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(16, 1 << 22, Spec("qsgd:bits=4"), ExchangeModel()),
            ExchangeKind::kDenseRing);
  // A transformer's 50 MiB bucket at 5 % on 4 ranks (the default model):
  // the allreduce halves the bytes, but its work per entry costs more than
  // that saves; on 4 emulated hosts it took 3x the allgather's step.
  const CompressionSpec dense_topk = Spec("topk:ratio=0.05");
  EXPECT_EQ(ChooseExchange(4, 13107200, dense_topk, ExchangeModel()),
            ExchangeKind::kSparseAllgather);
  EXPECT_EQ(ChooseExchange(4, 13107200, Spec("randomk:ratio=0.05"), ExchangeModel()),
            ExchangeKind::kSparseAllgather);
  // Past the allgather's P decodes an entry, the allreduce again.
  EXPECT_EQ(ChooseExchange(32, 13107200, dense_topk, ExchangeModel()),
            ExchangeKind::kSparseAllreduce);
}

// Names and kinds round-trip; anything else (aliases, "auto") is no kind.
TEST(ExchangeCostModel, KindsFromTheirNames) {
  for (ExchangeKind kind : {ExchangeKind::kDenseRing, ExchangeKind::kSparseAllgather,
                            ExchangeKind::kSparseAllreduce, ExchangeKind::kCastAllreduce}) {
    EXPECT_EQ(ExchangeKindFromName(ExchangeKindName(kind)), kind);
  }
  for (const char* other : {"auto", "allgather", "dense", "", "Sparse_Allreduce", "unknown"}) {
    EXPECT_EQ(ExchangeKindFromName(other), std::nullopt) << other;
  }
}

// The sparse allreduce's entries cost one reduced_entries_per_second
// each, whatever the density, and the decode rate does not price them
// (it prices the allgather's P decodes an entry).
TEST(ExchangeCostModel, SparseAllreduceEntriesAtTheirOwnRate) {
  ExchangeModel model;
  model.seconds_per_message = 0;
  model.decoded_entries_per_second = 1e8;
  model.reduced_entries_per_second = 1e7;
  const uint64_t n = 1 << 24;
  const CompressionSpec sparse = Spec("topk:ratio=0.01"), denser = Spec("topk:ratio=0.04");
  const double k1 = sparse.SelectedCount(n), k2 = denser.SelectedCount(n);
  auto compute = [&](ExchangeKind kind, const CompressionSpec& spec, const ExchangeModel& m) {
    return EstimateExchange(kind, 8, n, spec, m).compute_seconds;
  };
  const double d = compute(ExchangeKind::kSparseAllreduce, denser, model) -
                   compute(ExchangeKind::kSparseAllreduce, sparse, model);
  EXPECT_NEAR(d, (k2 - k1) / 1e7, 1e-9);
  ExchangeModel faster_decode = model;
  faster_decode.decoded_entries_per_second = 4e8;
  EXPECT_EQ(compute(ExchangeKind::kSparseAllreduce, denser, faster_decode),
            compute(ExchangeKind::kSparseAllreduce, denser, model));
  // The allgather decodes P entries for each of its k.
  const double g = compute(ExchangeKind::kSparseAllgather, denser, model) -
                   compute(ExchangeKind::kSparseAllgather, sparse, model);
  EXPECT_NEAR(g, 8 * (k2 - k1) / 1e8, 1e-9);
  // The default: 11 decodes of the default decode rate.
  EXPECT_DOUBLE_EQ(ExchangeModel().reduced_entries_per_second,
                   ExchangeModel().decoded_entries_per_second / 11);
}

// Measured, the allreduce's rate is 1/11 of a decode at a density of at
// most 1 %: the codec's own decode at 1 % and below, else the same
// method's at 1 %, timed apart (a decode at 10 % is faster per entry).
TEST(ExchangeCostModel, MeasuredAllreduceRateAtOnePercent) {
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "job", absl::Seconds(20));
  auto group = transport::GlooGroup::Create(0, 1, store->Scoped("one"), transport::GroupOptions());
  ASSERT_TRUE(group.ok()) << group.status();
  for (const char* text : {"topk:ratio=0.01", "randomk:ratio=0.002", "topk:ratio=0.1",
                           "approx_topk:ratio=0.05,values=fp16"}) {
    const std::unique_ptr<Codec> codec = *MakeCodec(Spec(text));
    absl::StatusOr<ExchangeModel> m =
        AgreeExchangeModel(**group, ExchangeModel(), true, codec.get());
    ASSERT_TRUE(m.ok()) << m.status();
    const double reduced = m->reduced_entries_per_second;
    EXPECT_GT(reduced, 0) << text;
    EXPECT_TRUE(std::isfinite(reduced)) << text;
    EXPECT_NE(reduced, ExchangeModel().reduced_entries_per_second) << text;
    if (codec->spec().ratio <= 0.01) {
      EXPECT_EQ(reduced, m->decoded_entries_per_second / 11) << text;
    } else {
      EXPECT_NE(reduced, m->decoded_entries_per_second / 11) << text;
    }
    std::printf("%s: decoded %.3g entries/s, reduced %.3g (x11 %.3g)\n", text,
                m->decoded_entries_per_second, reduced, 11 * reduced);
  }
  // A codec that selects nothing leaves the figure as given.
  const std::unique_ptr<Codec> qsgd = *MakeCodec(Spec("qsgd:bits=4"));
  absl::StatusOr<ExchangeModel> m = AgreeExchangeModel(**group, ExchangeModel(), true, qsgd.get());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->reduced_entries_per_second, ExchangeModel().reduced_entries_per_second);
}

// Every byte sent or received costs seconds_per_byte of CPU (at the
// rank's share of a core), on top of the rest.
TEST(ExchangeCostModel, BytesCostTheirCpu) {
  const uint64_t n = 1 << 22;
  const CompressionSpec spec = Spec("topk:ratio=0.05");
  ExchangeModel none, some, shared;
  some.seconds_per_byte = shared.seconds_per_byte = 1e-9;
  shared.cores_per_rank = 0.25;
  for (ExchangeKind kind :
       {ExchangeKind::kDenseRing, ExchangeKind::kSparseAllgather, ExchangeKind::kSparseAllreduce}) {
    const ExchangeCost a = EstimateExchange(kind, 8, n, spec, none);
    const ExchangeCost b = EstimateExchange(kind, 8, n, spec, some);
    const ExchangeCost c = EstimateExchange(kind, 8, n, spec, shared);
    const double bytes = b.bytes_sent + b.bytes_received;
    EXPECT_GT(bytes, 0) << ExchangeKindName(kind);
    EXPECT_NEAR(b.compute_seconds - a.compute_seconds, bytes * 1e-9, 1e-12)
        << ExchangeKindName(kind);
    EXPECT_NEAR(c.compute_seconds, 4 * b.compute_seconds, 1e-12) << ExchangeKindName(kind);
    EXPECT_EQ(b.wire_seconds, a.wire_seconds) << ExchangeKindName(kind);
  }
}

// Ranks that share cores: the compute takes 1 / cores_per_rank as long
// (above 1 counts as 1), the wire as long as it was; and that can decide.
TEST(ExchangeCostModel, SharedCoresSlowTheComputeNotTheWire) {
  const uint64_t n = 1 << 24;
  const CompressionSpec spec = Spec("topk:ratio=0.01");
  ExchangeModel own, half, many;
  own.bytes_per_second = half.bytes_per_second = many.bytes_per_second = 1.25e8;
  half.cores_per_rank = 0.5;
  many.cores_per_rank = 16;
  for (ExchangeKind kind :
       {ExchangeKind::kDenseRing, ExchangeKind::kSparseAllgather, ExchangeKind::kSparseAllreduce}) {
    const ExchangeCost a = EstimateExchange(kind, 4, n, spec, own);
    const ExchangeCost b = EstimateExchange(kind, 4, n, spec, half);
    const ExchangeCost c = EstimateExchange(kind, 4, n, spec, many);
    EXPECT_GT(a.compute_seconds, 0) << ExchangeKindName(kind);
    EXPECT_DOUBLE_EQ(b.compute_seconds, 2 * a.compute_seconds) << ExchangeKindName(kind);
    EXPECT_EQ(b.wire_seconds, a.wire_seconds) << ExchangeKindName(kind);
    EXPECT_EQ(c.compute_seconds, a.compute_seconds) << ExchangeKindName(kind);
  }
  // Four ranks at 1 Gbit/s: with a core each the allreduce's fewer bytes
  // win; on half a core each its CPU loses to the allgather's.
  EXPECT_EQ(ChooseExchange(4, n, spec, own), ExchangeKind::kSparseAllreduce);
  EXPECT_EQ(ChooseExchange(4, n, spec, half), ExchangeKind::kSparseAllgather);
}

// The rule a report gives for a choice: time for the sparse specs, bytes
// alone for the codecs ChooseExchange picks by bytes.
// DenseTwoLevel: the two levels (rings across nodes on 1/L shards sharing
// the link, the node's ring, the verdict's round) against the world ring,
// by the model's own estimates; never with one node or one rank a node.
TEST(ExchangeCostModel, DenseTwoLevelWhereItIsFaster) {
  const ExchangeModel m;
  const CompressionSpec none;
  auto by_estimates = [&](int nodes, int local, uint64_t n) {
    ExchangeModel shared = m;
    shared.bytes_per_second /= local;
    const double two =
        EstimateExchange(ExchangeKind::kDenseRing, nodes, (n + local - 1) / local, none, shared)
            .seconds() +
        EstimateExchange(ExchangeKind::kDenseRing, local, n, none, m).seconds() +
        m.seconds_per_round;
    return two < EstimateExchange(ExchangeKind::kDenseRing, nodes * local, n, none, m).seconds();
  };
  for (int nodes : {2, 3, 4, 16, 64, 256}) {
    for (int local : {2, 4, 8}) {
      for (uint64_t n : {uint64_t{1000}, uint64_t{68000}, uint64_t{1} << 20, uint64_t{25} << 20}) {
        EXPECT_EQ(DenseTwoLevel(nodes, local, n, m), by_estimates(nodes, local, n))
            << nodes << " x " << local << ", n = " << n;
      }
    }
  }
  EXPECT_FALSE(DenseTwoLevel(1, 8, 68000, m));
  EXPECT_TRUE(DenseTwoLevel(1 << 30, 8, 68000, m));  // no int overflow
  EXPECT_FALSE(DenseTwoLevel(256, 1, 68000, m));
  // ResNet-50's 68K dense elements: the world ring at 2 x 2, two levels at
  // 256 x 8 (4,095 ring steps against a few hundred).
  EXPECT_FALSE(DenseTwoLevel(2, 2, 68000, m));
  EXPECT_TRUE(DenseTwoLevel(256, 8, 68000, m));
}

// DenseRidesAllgather: the dense section's (P - 1) x 4 bytes an element
// received against the ring's own estimate (agreement, 2(P - 1) steps,
// bytes); never for one rank.
TEST(ExchangeCostModel, DenseRidesAllgatherWhereItIsNoSlower) {
  const CompressionSpec none;
  for (double bytes_per_second : {2.5e6, 1.25e8, 1.25e9, 3e10}) {
    ExchangeModel m;
    m.bytes_per_second = bytes_per_second;
    for (int p : {2, 3, 4, 8, 16, 64, 512}) {
      for (uint64_t d : {uint64_t{1}, uint64_t{300}, uint64_t{67624}, uint64_t{1} << 22}) {
        const double ride = (p - 1) * 4.0 * static_cast<double>(d) / bytes_per_second;
        const double ring = EstimateExchange(ExchangeKind::kDenseRing, p, d, none, m).seconds();
        EXPECT_EQ(DenseRidesAllgather(p, d, m), ride <= ring)
            << "P = " << p << ", d = " << d << ", " << bytes_per_second << " B/s";
      }
    }
  }
  const ExchangeModel m;
  EXPECT_FALSE(DenseRidesAllgather(1, 100, m));
  // ResNet-50's dense tail: rides at 4 ranks, the ring from 8; a few
  // hundred elements ride even at 64 (the ring's 127 steps).
  EXPECT_TRUE(DenseRidesAllgather(4, 67624, m));
  EXPECT_FALSE(DenseRidesAllgather(8, 67624, m));
  EXPECT_TRUE(DenseRidesAllgather(64, 300, m));
}

TEST(ExchangeCostModel, ChoiceRuleNamesHowTheSpecChooses) {
  EXPECT_STREQ(ExchangeChoiceRule(Spec("topk:ratio=0.01")),
               "the cost model's smallest predicted time");
  EXPECT_STREQ(ExchangeChoiceRule(Spec("randomk:ratio=0.01")),
               "the cost model's smallest predicted time");
  for (const char* spec : {"qsgd:bits=4", "sign", "fp16", "bf16"}) {
    EXPECT_EQ(std::string(ExchangeChoiceRule(Spec(spec))).rfind("bytes alone", 0), 0u) << spec;
  }
  EXPECT_NE(std::string(ExchangeChoiceRule(Spec("none"))).find("dense ring"), std::string::npos);
}

// The cast allreduce moves (P-1)/P (2n + 2n) bytes: half the ring's at
// any P, below the casts' allgather from P = 3; its rounds grow with P
// only through the ring allgather of the averages.
TEST(ExchangeCostModel, CastAllreduceBytes) {
  ExchangeModel model;  // 1 Gbit/s, where the wire is most of the time
  model.bytes_per_second = 1.25e8;
  const uint64_t n = 1 << 24;
  for (int p : {4, 8, 64}) {
    SCOPED_TRACE(p);
    const ExchangeCost cast =
        EstimateExchange(ExchangeKind::kCastAllreduce, p, n, Spec("fp16"), model);
    const ExchangeCost ring = EstimateExchange(ExchangeKind::kDenseRing, p, n, Spec("fp16"), model);
    const ExchangeCost gather =
        EstimateExchange(ExchangeKind::kSparseAllgather, p, n, Spec("bf16"), model);
    EXPECT_NEAR(cast.bytes_sent / ring.bytes_sent, 0.5, 0.002);
    EXPECT_LT(cast.bytes_sent, gather.bytes_sent);
    EXPECT_LT(cast.seconds(), ring.seconds());
  }
  EXPECT_EQ(EstimateExchange(ExchangeKind::kCastAllreduce, 4, n, Spec("fp16"), model).rounds,
            1 + 1 + 2 + 4);
  EXPECT_STREQ(ExchangeKindName(ExchangeKind::kCastAllreduce), "cast_allreduce");
}

// The allgather of a codec that sends every element moves that codec's
// frame to each peer: the model's bytes differ from the codec's
// MaxEncodedBytes (exact for these codecs) by the same framing for all.
TEST(ExchangeCostModel, EveryElementFramesAreTheCodecsFrames) {
  const ExchangeModel model;
  const uint64_t n = 1000003;
  double framing = -1;
  for (const char* text :
       {"fp16", "bf16", "qsgd:bits=4,bucket=512", "qsgd:bits=3,bucket=7", "sign:bucket=1000"}) {
    SCOPED_TRACE(text);
    const CompressionSpec spec = Spec(text);
    auto codec = MakeCodec(spec);
    ASSERT_TRUE(codec.ok());
    const ExchangeCost c = EstimateExchange(ExchangeKind::kSparseAllgather, 5, n, spec, model);
    const double per_peer = c.bytes_sent / 4 - static_cast<double>((*codec)->MaxEncodedBytes(n));
    if (framing < 0) framing = per_peer;
    EXPECT_EQ(per_peer, framing);
    EXPECT_GT(per_peer, 0);
    EXPECT_LT(per_peer, 512);
  }
}

// Messages per rank, and the CPU of those beyond one per round.
TEST(ExchangeCostModel, MessagesBeyondOnePerRoundCostCpu) {
  const CompressionSpec spec = Spec("topk:ratio=0.01");
  const uint64_t n = 4 << 20;
  ExchangeModel free_messages;
  free_messages.seconds_per_message = 0;
  ExchangeModel costly = free_messages;
  costly.seconds_per_message = 1e-3;
  auto at = [&](ExchangeKind kind, int p, const ExchangeModel& m) {
    return EstimateExchange(kind, p, n, spec, m);
  };
  // P = 16, direct: agreement 15, reduce-scatter 15, 3 selection rounds of
  // a direct reduce-scatter and allgather (2 x 15), Bruck 4; in 1 + 4 + 3 x
  // 2 + 4 = 15 rounds.
  const ExchangeCost ar = at(ExchangeKind::kSparseAllreduce, 16, costly);
  EXPECT_EQ(ar.messages, 15 + 15 + 3 * 30 + 4);
  EXPECT_EQ(ar.rounds, 15);
  EXPECT_NEAR(
      ar.compute_seconds - at(ExchangeKind::kSparseAllreduce, 16, free_messages).compute_seconds,
      (124 - 15) * 1e-3, 1e-9);
  // The allgather: one direct exchange of bounded blocks (no agreement
  // round after a bucket's first exchange).
  EXPECT_EQ(at(ExchangeKind::kSparseAllgather, 16, costly).messages, 15);
  EXPECT_EQ(at(ExchangeKind::kDenseRing, 16, costly).messages, 45);
  // Past 16 ranks the allgather is a ring, one message per step (P - 1);
  // the allreduce's agreement and histograms take log-many rounds of
  // several messages each.
  EXPECT_EQ(at(ExchangeKind::kSparseAllgather, 256, costly).messages, 255);
  EXPECT_EQ(at(ExchangeKind::kSparseAllreduce, 256, costly).messages, 319);
  // One rank: nothing.
  EXPECT_EQ(at(ExchangeKind::kSparseAllreduce, 1, costly).messages, 0);
  EXPECT_EQ(at(ExchangeKind::kSparseAllreduce, 1, costly).compute_seconds,
            at(ExchangeKind::kSparseAllreduce, 1, free_messages).compute_seconds);
}

// The dense passes run at the model's streaming rate: the ring's averaging
// is 2n of them.
TEST(ExchangeCostModel, DensePassesAtTheStreamingRate) {
  const CompressionSpec spec = Spec("topk:ratio=0.001");
  const uint64_t n = 1 << 24;
  ExchangeModel slow;
  slow.seconds_per_message = 0;
  slow.streamed_elements_per_second = 1e9;
  ExchangeModel fast = slow;
  fast.streamed_elements_per_second = 4e9;
  EXPECT_NEAR(EstimateExchange(ExchangeKind::kDenseRing, 4, n, spec, slow).compute_seconds,
              2.0 * n / 1e9, 1e-12);
  // The sparse allreduce writes the bucket and, measured, about one pass
  // over its region more: n + n/P.
  const double d =
      EstimateExchange(ExchangeKind::kSparseAllreduce, 4, n, spec, slow).compute_seconds -
      EstimateExchange(ExchangeKind::kSparseAllreduce, 4, n, spec, fast).compute_seconds;
  EXPECT_NEAR(d, 1.25 * n / 1e9 - 1.25 * n / 4e9, 1e-9);
}

// The measured link rate leaves out the first transfer (the warm-up) and
// takes the median of the rest, less the message steps' latency.
TEST(ExchangeCostModel, MeasuredLinkRateDropsTheWarmUpAndTakesTheMedian) {
  // Seconds for 1 MB: a slow first transfer, then 2, 2.5, 20 (a rank
  // descheduled), 1.5 and 3 ms: the median of those five is 2.5 ms.
  const double seconds[] = {26e-3, 2e-3, 2.5e-3, 20e-3, 1.5e-3, 3e-3};
  EXPECT_DOUBLE_EQ(MeasuredLinkRate(seconds, 1e6, 0.5e-3), 1e6 / 2e-3);
  EXPECT_DOUBLE_EQ(MeasuredLinkRate(seconds, 1e6, 0), 1e6 / 2.5e-3);
  // Even counts take the upper middle one: 6 of {9, 3, 6, 4}.
  const double even[] = {1.0, 9.0, 3.0, 6.0, 4.0};
  EXPECT_DOUBLE_EQ(MeasuredLinkRate(even, 12.0, 0), 2.0);
  // Latency at or above the transfer time: capped at 1 us, not negative.
  EXPECT_DOUBLE_EQ(MeasuredLinkRate(seconds, 1e6, 1.0), 1e6 / 1e-6);
  // Nothing timed after the warm-up: no rate.
  const double one[] = {1e-3};
  EXPECT_EQ(MeasuredLinkRate(one, 1e6, 0), 0);
  EXPECT_EQ(MeasuredLinkRate({}, 1e6, 0), 0);
}

// AgreeExchangeModel: every rank ends with the same model; rates and times
// are the slowest rank's, exactly, the CPU of a message the mean over
// ranks; with measure
// the figures are positive and finite.
TEST(ExchangeCostModel, AgreementOverRanks) {
  constexpr int kRanks = 3;
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "job", absl::Seconds(20));
  std::vector<ExchangeModel> given(kRanks), measured(kRanks);
  std::vector<std::thread> threads;
  const std::unique_ptr<Codec> codec = *MakeCodec(Spec("topk:ratio=0.01"));
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto group = transport::GlooGroup::Create(r, kRanks, store->Scoped("agree"),
                                                transport::GroupOptions());
      ASSERT_TRUE(group.ok()) << group.status();
      ExchangeModel mine;
      mine.bytes_per_second = 1.25e8 * (r + 1);
      mine.seconds_per_round = r == 0 ? -0.0 : 0.0;  // zero: a time may be
      mine.encoded_elements_per_second = 1e8 * (r + 1);
      mine.streamed_elements_per_second = 1e9 * (r + 1);
      mine.seconds_per_message = 10e-6 * (r + 1);
      mine.cores_per_rank = 1.0 / (r + 1);
      mine.seconds_per_byte = 1e-9 * (r + 1);
      mine.reduced_entries_per_second = 1e7 * (r + 1);
      absl::StatusOr<ExchangeModel> m = AgreeExchangeModel(**group, mine, false, nullptr);
      ASSERT_TRUE(m.ok()) << m.status();
      given[r] = *m;
      m = AgreeExchangeModel(**group, mine, true, codec.get());
      ASSERT_TRUE(m.ok()) << m.status();
      measured[r] = *m;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    // Exactly as the slowest rank gave them (rates once came back as
    // 1 / (1 / x): 124999999.99999999 for 1.25e8; a zero time as 1e-12).
    EXPECT_EQ(given[r].bytes_per_second, 1.25e8);
    EXPECT_EQ(given[r].seconds_per_round, 0.0);
    EXPECT_FALSE(std::signbit(given[r].seconds_per_round));
    EXPECT_EQ(given[r].encoded_elements_per_second, 1e8);
    EXPECT_EQ(given[r].streamed_elements_per_second, 1e9);
    EXPECT_EQ(given[r].reduced_entries_per_second, 1e7);
    EXPECT_NEAR(given[r].seconds_per_message, 20e-6, 1e-12);
    EXPECT_EQ(given[r].cores_per_rank, 1.0 / 3);          // the fewest
    EXPECT_NEAR(given[r].seconds_per_byte, 2e-9, 1e-15);  // the mean, as a message's
    EXPECT_GE(measured[r].seconds_per_byte, 0);
    EXPECT_TRUE(std::isfinite(measured[r].seconds_per_byte));
    EXPECT_EQ(measured[r].seconds_per_byte, measured[0].seconds_per_byte);
    // Three ranks of one process: one host's CPUs shared three ways.
    EXPECT_EQ(measured[r].cores_per_rank,
              CoresPerRank(std::vector<RankCores>(kRanks, ThisRankCores()), r));
    for (double v :
         {measured[r].bytes_per_second, measured[r].seconds_per_round,
          measured[r].encoded_elements_per_second, measured[r].decoded_entries_per_second,
          measured[r].streamed_elements_per_second, measured[r].reduced_entries_per_second}) {
      EXPECT_GT(v, 0);
      EXPECT_TRUE(std::isfinite(v));
    }
    EXPECT_GE(measured[r].seconds_per_message, 0);
    EXPECT_LT(measured[r].seconds_per_message, 0.1);
    EXPECT_EQ(measured[r].seconds_per_message, measured[0].seconds_per_message);
    EXPECT_EQ(measured[r].streamed_elements_per_second, measured[0].streamed_elements_per_second);
    EXPECT_EQ(measured[r].reduced_entries_per_second, measured[0].reduced_entries_per_second);
  }
}

}  // namespace
}  // namespace gradwire
