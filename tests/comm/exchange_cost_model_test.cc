// The cost model's formulas and choices (lib/comm/exchange_cost_model.h).
#include "gradwire/lib/comm/exchange_cost_model.h"

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
  // Up to 16 ranks the window is 4 sources: ceil((P - 1) / 4) waves.
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 16), 1 + 4);
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 5), 1 + 1);
  // GlooGroup agrees in one direct round at any P; the gather is a ring above 16.
  EXPECT_EQ(rounds(ExchangeKind::kSparseAllgather, 64), 1 + 63);
  EXPECT_EQ(rounds(ExchangeKind::kDenseRing, 64), 1 + 126);
  EXPECT_EQ(EstimateExchange(ExchangeKind::kSparseAllreduce, 64, 1 << 22,
                             Spec("randomk:ratio=0.01"), model)
                .rounds,
            6 + 8 + 6);
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
  // Not a sparse method: the ring.
  EXPECT_EQ(ChooseExchange(64, 1 << 22, Spec("qsgd:bits=4"), slow), ExchangeKind::kDenseRing);
}

}  // namespace
}  // namespace gradwire
