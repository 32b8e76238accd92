// In-process tests of GradientExchanger and Communicator rules that need
// no peers: a world of one rank over an in-memory store. Multi-rank
// behaviour (bitwise equality with the CPU reference, mismatches, MACs)
// is in comm_test.py.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gtest/gtest.h"

// Counts heap allocations, to check the steady state allocates nothing.
std::atomic<long> g_allocations{0};

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size > 0 ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace gradwire {
namespace {

// A one-rank communicator with `options`.
absl::StatusOr<std::unique_ptr<Communicator>> CreateComm(const CommunicatorOptions& options) {
  static int scope = 0;
  static auto store = transport::RendezvousStore::Wrap(
      std::make_shared<gloo::rendezvous::HashStore>(), "job", absl::Seconds(10));
  auto world = transport::GlooGroup::Create(0, 1, store->Scoped(std::to_string(scope++)),
                                            transport::GroupOptions());
  EXPECT_TRUE(world.ok()) << world.status();
  auto secret = JobSecret::FromValue("0123456789abcdef0123", "test");
  auto auth = FrameAuthenticator::Create(*secret, "job");
  return Communicator::Create(std::move(*world), 0, 1, std::move(*auth), options);
}

std::unique_ptr<Communicator> MakeComm(const std::string& spec_text, uint64_t dense_below = 16384) {
  CommunicatorOptions options;
  options.compression = *CompressionSpec::Parse(spec_text);
  options.dense_below_elements = dense_below;
  auto comm = CreateComm(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return std::move(*comm);
}

std::unique_ptr<GradientExchanger> MakeExchanger(const std::string& spec,
                                                 uint64_t bucket_bytes = 1 << 20,
                                                 int pipeline_depth = 2) {
  ExchangerOptions o;
  o.bucket_bytes = bucket_bytes;
  o.pipeline_depth = pipeline_depth;
  auto ex = GradientExchanger::Create(MakeComm(spec), o);
  EXPECT_TRUE(ex.ok()) << ex.status();
  return std::move(*ex);
}

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 50.0f;
  return v;
}

TEST(CommunicatorTest, PathRuleFollowsSizeShapeAndMethod) {
  auto topk = MakeComm("topk:ratio=0.01");
  EXPECT_EQ(topk->PathFor(16383, false), ExchangePath::kDense);
  EXPECT_EQ(topk->PathFor(16384, false), ExchangePath::kCompressed);
  EXPECT_EQ(topk->PathFor(1 << 20, true), ExchangePath::kDense);  // 1-D: biases, norms
  auto none = MakeComm("none");
  EXPECT_EQ(none->PathFor(1 << 20, false), ExchangePath::kDense);
}

// A model the cost model cannot predict with (a rate of 0 or NaN, a
// negative time) is refused at Create, naming the figure; measured, the
// given one is not used, so it is not checked.
TEST(CommunicatorTest, CreateRefusesAModelItCannotPredictWith) {
  CommunicatorOptions options;
  options.compression = *CompressionSpec::Parse("topk:ratio=0.01");
  options.exchange_model.bytes_per_second = 0;
  auto comm = CreateComm(options);
  ASSERT_TRUE(absl::IsInvalidArgument(comm.status())) << comm.status();
  EXPECT_NE(comm.status().message().find("exchange_model: bytes_per_second"), std::string::npos)
      << comm.status();
  options.exchange_model = ExchangeModel();
  options.exchange_model.seconds_per_round = -1e-6;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateComm(options).status()));
  options.exchange_model = *ParseExchangeModel("bytes_per_second=1.25e8,seconds_per_round=2e-4");
  comm = CreateComm(options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->exchange_model().bytes_per_second, 1.25e8);
}

TEST(CommunicatorTest, SingleRankCompressedMeanIsTheDecodedFrame) {
  auto comm = MakeComm("topk:ratio=0.1");
  std::vector<float> g = Ramp(1000, 1.0f);
  std::vector<float> data = g;
  ASSERT_TRUE(comm->AllreduceMean(0, 1, absl::MakeSpan(data), ExchangePath::kCompressed).ok());
  // Top-k keeps 100 values exactly and zeroes the rest.
  int kept = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (data[i] != 0.0f) {
      EXPECT_EQ(data[i], g[i]);
      ++kept;
    }
  }
  EXPECT_LE(kept, 100);
  EXPECT_EQ(comm->last_call().compressed_buckets, 1u);
  EXPECT_NE(comm->totals().ToString().find("1 compressed"), std::string::npos);
}

// A bucket's steps must grow: a repeated or earlier step would let a frame
// recorded at its first use be accepted again. The refusal sends nothing
// and poisons nothing; other buckets keep their own steps, and
// RestoreState starts every bucket afresh (a checkpoint's steps come again).
TEST(CommunicatorTest, EachBucketsStepsMustGrow) {
  auto comm = MakeComm("topk:ratio=0.1");
  std::vector<float> data = Ramp(1000, 1.0f);
  for (ExchangePath path : {ExchangePath::kCompressed, ExchangePath::kDense}) {
    const uint32_t bucket = path == ExchangePath::kDense ? 5 : 4;
    ASSERT_TRUE(comm->AllreduceMean(bucket, 7, absl::MakeSpan(data), path).ok());
    for (uint64_t again : {7, 6, 0}) {
      const std::vector<float> before = data;
      absl::Status s = comm->AllreduceMean(bucket, again, absl::MakeSpan(data), path);
      EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
      EXPECT_NE(s.message().find("is not after its previous step 7"), std::string::npos) << s;
      EXPECT_EQ(data, before);
    }
    EXPECT_TRUE(
        absl::IsInvalidArgument(comm->AllreduceMeanWithDense(bucket, 7, absl::MakeSpan(data), {})));
  }
  EXPECT_TRUE(comm->health().ok()) << comm->health();
  EXPECT_TRUE(comm->AllreduceMean(6, 0, absl::MakeSpan(data), ExchangePath::kDense).ok());
  EXPECT_TRUE(comm->AllreduceMean(4, 8, absl::MakeSpan(data), ExchangePath::kCompressed).ok());
  absl::StatusOr<std::string> state = comm->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(comm->RestoreState(*state).ok());
  EXPECT_TRUE(comm->AllreduceMean(4, 1, absl::MakeSpan(data), ExchangePath::kCompressed).ok());
}

TEST(ExchangerTest, PlanFusesTensorsIntoDenseAndCompressedBuckets) {
  // 80 KB buckets: 20000 floats.
  auto ex = MakeExchanger("topk:ratio=0.01", 80000);
  ASSERT_TRUE(ex->BeginStep(0).ok());
  std::vector<std::vector<float>> t = {Ramp(30000, 1), Ramp(10, 1),  Ramp(20000, 1),
                                       Ramp(20000, 1), Ramp(100, 1), Ramp(0, 1)};
  const int64_t one_d[] = {10};
  ASSERT_TRUE(ex->Submit("big", absl::MakeSpan(t[0])).ok());
  ASSERT_TRUE(ex->Submit("bias", absl::MakeSpan(t[1]), one_d).ok());
  ASSERT_TRUE(ex->Submit("w1", absl::MakeSpan(t[2])).ok());
  ASSERT_TRUE(ex->Submit("w2", absl::MakeSpan(t[3])).ok());
  ASSERT_TRUE(ex->Submit("small", absl::MakeSpan(t[4])).ok());
  ASSERT_TRUE(ex->Submit("empty", absl::MakeSpan(t[5])).ok());
  ASSERT_TRUE(ex->Flush().ok());
  ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
  std::vector<BucketInfo> plan = ex->Plan();
  ASSERT_EQ(plan.size(), 4u) << ex->DescribePlan();
  EXPECT_EQ(plan[0].path, ExchangePath::kCompressed);  // big, alone: over the cap
  EXPECT_EQ(plan[0].tensors, std::vector<std::string>({"big"}));
  EXPECT_EQ(plan[1].path, ExchangePath::kDense);  // bias, small, empty
  EXPECT_EQ(plan[1].tensors, std::vector<std::string>({"bias", "small", "empty"}));
  EXPECT_EQ(plan[2].tensors, std::vector<std::string>({"w1"}));  // reaches the cap
  EXPECT_EQ(plan[3].tensors, std::vector<std::string>({"w2"}));
  // Dense buckets with one rank: the mean is the input.
  EXPECT_EQ(t[1], Ramp(10, 1));
}

TEST(ExchangerTest, LaterStepsMustSubmitThePlannedTensors) {
  auto ex = MakeExchanger("topk:ratio=0.01");
  std::vector<float> a = Ramp(20000, 1), b = Ramp(20000, 2);
  ASSERT_TRUE(ex->BeginStep(0).ok());
  ASSERT_TRUE(ex->Submit("a", absl::MakeSpan(a)).ok());
  ASSERT_TRUE(ex->Submit("b", absl::MakeSpan(b)).ok());
  ASSERT_TRUE(ex->Flush().ok());
  ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
  ASSERT_TRUE(ex->BeginStep(1).ok());
  auto bad = ex->Submit("b", absl::MakeSpan(b));  // out of order
  EXPECT_TRUE(absl::IsFailedPrecondition(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("same order"), std::string::npos);
  // Poisoned from now on.
  EXPECT_TRUE(absl::IsFailedPrecondition(ex->BeginStep(2)));
  EXPECT_FALSE(ex->health().ok());
}

TEST(ExchangerTest, StepsMustIncreaseAndWaitsHaveDeadlines) {
  auto ex = MakeExchanger("topk:ratio=0.01");
  std::vector<float> a = Ramp(20000, 1);
  ASSERT_TRUE(ex->BeginStep(5).ok());
  auto ticket = ex->Submit("a", absl::MakeSpan(a));
  ASSERT_TRUE(ticket.ok());
  // Not flushed yet: the bucket is not full, the wait must end in time.
  const absl::Time t0 = absl::Now();
  absl::Status s = ex->Wait(*ticket, absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  EXPECT_TRUE(ex->health().ok());  // a caller's deadline poisons nothing
  ASSERT_TRUE(ex->Flush().ok());
  ASSERT_TRUE(ex->Wait(*ticket, absl::Seconds(10)).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ex->BeginStep(5)));  // replayed step
  EXPECT_GT(ex->StepStats().wait_time, absl::ZeroDuration());
}

TEST(ExchangerTest, CheckpointRoundTripAndValidation) {
  auto ex = MakeExchanger("topk:ratio=0.01");
  std::vector<float> a = Ramp(20000, 1);
  ASSERT_TRUE(ex->BeginStep(0).ok());
  ASSERT_TRUE(ex->Submit("a", absl::MakeSpan(a)).ok());
  ASSERT_TRUE(ex->Flush().ok());
  ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
  auto state = ex->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();

  auto fresh = MakeExchanger("topk:ratio=0.01");
  std::string corrupt = *state;
  corrupt[corrupt.size() - 20] ^= 0x40;
  EXPECT_TRUE(absl::IsDataLoss(fresh->RestoreState(corrupt)));
  EXPECT_FALSE(fresh->RestoreState(state->substr(0, 10)).ok());
  EXPECT_TRUE(fresh->RestoreState(*state).ok());
  EXPECT_EQ(*fresh->SaveState(), *state);

  auto other = MakeExchanger("topk:ratio=0.02");
  absl::Status s = other->RestoreState(*state);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("topk"), std::string::npos);
}

// The pipeline reorders work across threads, never the arithmetic: any
// depth gives, bit for bit, what the synchronous Communicator gives for
// the same buckets in the same order, step after step (error feedback
// carries state from one step to the next, so a mixed-up residual or
// frame would show).
TEST(ExchangerTest, PipelineDepthDoesNotChangeResults) {
  const char* names[] = {"a", "b", "c", "d", "e"};
  const size_t n = 20000;  // one bucket per tensor (80 KB buckets)
  auto input = [](int step, int t) { return Ramp(n, 0.5f + 0.25f * step + t); };
  auto reference = MakeComm("topk:ratio=0.05");
  std::vector<std::vector<std::vector<float>>> want(4);
  for (int step = 0; step < 4; ++step) {
    for (int t = 0; t < 5; ++t) {
      want[step].push_back(input(step, t));
      ASSERT_TRUE(
          reference
              ->AllreduceMean(t, step, absl::MakeSpan(want[step][t]), ExchangePath::kCompressed)
              .ok());
    }
  }
  for (int depth : {1, 2, 3}) {
    auto ex = MakeExchanger("topk:ratio=0.05", 80000, depth);
    for (int step = 0; step < 4; ++step) {
      std::vector<std::vector<float>> grads;
      for (int t = 0; t < 5; ++t) grads.push_back(input(step, t));
      ASSERT_TRUE(ex->BeginStep(step).ok());
      for (int t = 0; t < 5; ++t) ASSERT_TRUE(ex->Submit(names[t], absl::MakeSpan(grads[t])).ok());
      ASSERT_TRUE(ex->Flush().ok());
      ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
      ASSERT_EQ(ex->bucket_count(), 5u) << ex->DescribePlan();
      for (int t = 0; t < 5; ++t) {
        EXPECT_EQ(grads[t], want[step][t])
            << "depth " << depth << " step " << step << " tensor " << names[t];
      }
      const ExchangeStats st = ex->StepStats();
      EXPECT_EQ(st.compressed_buckets, 5u);
      EXPECT_EQ(st.elements, 5 * n);
      EXPECT_GT(st.span_time, absl::ZeroDuration());
      EXPECT_GT(st.copy_time, absl::ZeroDuration());
      EXPECT_GE(st.OverlapFraction(), 0.0);
      EXPECT_LE(st.OverlapFraction(), 1.0);
    }
  }
  ExchangerOptions bad;
  bad.pipeline_depth = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(GradientExchanger::Create(MakeComm("topk"), bad).status()));
}

// The step's timeline holds each bucket's stages in pipeline order, each
// pipeline thread runs one stage at a time, the pipeline depth bounds the
// staged buckets between encode and finish, and BeginStep starts afresh.
TEST(ExchangerTest, StepTimelineHoldsEveryStageInPipelineOrder) {
  const char* names[] = {"a", "b", "c", "d"};
  // 80 KB buckets: a, c and d compressed (one each), b (100 floats) dense.
  const size_t sizes[] = {20000, 100, 20000, 20000};
  for (int depth : {1, 2}) {
    auto ex = MakeExchanger("topk:ratio=0.05", 80000, depth);
    for (int step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> grads;
      for (int t = 0; t < 4; ++t) grads.push_back(Ramp(sizes[t], 1.0f + step));
      ASSERT_TRUE(ex->BeginStep(step).ok());
      EXPECT_TRUE(ex->StepTimeline().empty()) << "BeginStep keeps no span of the last step";
      std::vector<uint32_t> tickets;
      for (int t = 0; t < 4; ++t) {
        auto ticket = ex->Submit(names[t], absl::MakeSpan(grads[t]));
        ASSERT_TRUE(ticket.ok()) << ticket.status();
        tickets.push_back(ticket->bucket);
      }
      ASSERT_TRUE(ex->Flush().ok());
      ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
      ASSERT_EQ(ex->bucket_count(), 4u) << ex->DescribePlan();
      const std::vector<StageSpan> spans = ex->StepTimeline();
      const std::string where = absl::StrCat("depth ", depth, " step ", step);
      // Per bucket, its stages in the order recorded.
      std::map<uint32_t, std::vector<StageSpan>> by_bucket;
      for (const StageSpan& s : spans) {
        EXPECT_LE(s.start, s.end) << where;
        by_bucket[s.bucket].push_back(s);
      }
      ASSERT_EQ(by_bucket.size(), 4u) << where;
      for (int t = 0; t < 4; ++t) {
        const std::vector<StageSpan>& b = by_bucket[tickets[t]];
        std::vector<PipelineStage> want = {PipelineStage::kQueued, PipelineStage::kEncode,
                                           PipelineStage::kTransfer, PipelineStage::kFinish};
        if (sizes[t] == 100) {
          want = {PipelineStage::kQueued, PipelineStage::kExchange, PipelineStage::kFinish};
        }
        ASSERT_EQ(b.size(), want.size()) << where << " bucket " << tickets[t];
        for (size_t i = 0; i < b.size(); ++i) {
          EXPECT_EQ(b[i].stage, want[i]) << where << " bucket " << tickets[t] << " span " << i;
          if (i > 0) EXPECT_LE(b[i - 1].end, b[i].start) << where << " bucket " << tickets[t];
        }
        EXPECT_EQ(b[0].start, b[0].end) << "queued is an instant";
      }
      // One thread, one stage at a time.
      for (const char* thread : {"compute", "comm"}) {
        absl::Time last_end = absl::InfinitePast();
        std::vector<StageSpan> on;
        for (const StageSpan& s : spans) {
          if (std::string(PipelineThreadName(s.stage)) == thread) on.push_back(s);
        }
        std::sort(on.begin(), on.end(),
                  [](const StageSpan& x, const StageSpan& y) { return x.start < y.start; });
        for (const StageSpan& s : on) {
          EXPECT_LE(last_end, s.start) << where << " " << thread << " runs two stages at once";
          last_end = s.end;
        }
      }
      // Depth 1: a staged bucket's encode starts after the previous
      // staged bucket's finish ended (one slot).
      if (depth == 1) {
        absl::Time previous_finish = absl::InfinitePast();
        for (int t : {0, 2, 3}) {
          const std::vector<StageSpan>& b = by_bucket[tickets[t]];
          EXPECT_LE(previous_finish, b[1].start) << where << " bucket " << tickets[t];
          previous_finish = b[3].end;
        }
      }
    }
  }
  EXPECT_STREQ(PipelineStageName(PipelineStage::kTransfer), "transfer");
  EXPECT_STREQ(PipelineThreadName(PipelineStage::kQueued), "caller");
}

// Gradients written into their slots travel without the copies in and
// out, and give the same bits as the copying path. Tensors "b" and "c"
// share a bucket, so a slot is an inner part of a bucket too.
TEST(ExchangerTest, GradientSlotsSkipTheCopiesAndChangeNoResult) {
  const char* names[] = {"a", "b", "c"};
  const size_t sizes[] = {30000, 20000, 20000};
  auto input = [&](int step, int t) { return Ramp(sizes[t], 0.75f + 0.5f * step + t); };
  auto copying = MakeExchanger("topk:ratio=0.05", 150000);
  auto slotted = MakeExchanger("topk:ratio=0.05", 150000);
  EXPECT_TRUE(absl::IsFailedPrecondition(slotted->GradientSlot("a").status()));
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<float>> want, grads;
    for (int t = 0; t < 3; ++t) {
      want.push_back(input(step, t));
      grads.push_back(input(step, t));
    }
    ASSERT_TRUE(copying->BeginStep(step).ok());
    for (int t = 0; t < 3; ++t)
      ASSERT_TRUE(copying->Submit(names[t], absl::MakeSpan(want[t])).ok());
    ASSERT_TRUE(copying->Flush().ok());
    ASSERT_TRUE(copying->WaitAll(absl::Seconds(10)).ok());

    ASSERT_TRUE(slotted->BeginStep(step).ok());
    std::vector<absl::Span<float>> used;
    for (int t = 0; t < 3; ++t) {
      absl::Span<float> span = absl::MakeSpan(grads[t]);
      if (step > 0) {  // the plan is fixed: write the gradient into its slot
        absl::StatusOr<absl::Span<float>> slot = slotted->GradientSlot(names[t]);
        ASSERT_TRUE(slot.ok()) << slot.status();
        ASSERT_EQ(slot->size(), sizes[t]);
        std::copy(grads[t].begin(), grads[t].end(), slot->begin());
        span = *slot;
      }
      used.push_back(span);
      ASSERT_TRUE(slotted->Submit(names[t], span).ok());
    }
    ASSERT_TRUE(slotted->Flush().ok());
    ASSERT_TRUE(slotted->WaitAll(absl::Seconds(10)).ok());
    ASSERT_EQ(slotted->bucket_count(), 2u) << slotted->DescribePlan();
    for (int t = 0; t < 3; ++t) {
      EXPECT_TRUE(std::equal(used[t].begin(), used[t].end(), want[t].begin(), want[t].end()))
          << "step " << step << " tensor " << names[t];
    }
  }
  EXPECT_TRUE(absl::IsNotFound(slotted->GradientSlot("nope").status()));
}

TEST(ExchangeStatsTest, OverlapFractionMeasuresHiddenTime) {
  ExchangeStats s;
  s.compress_time = absl::Milliseconds(30);
  s.wire_time = absl::Milliseconds(100);
  s.span_time = absl::Milliseconds(130);  // back to back
  EXPECT_DOUBLE_EQ(s.OverlapFraction(), 0.0);
  s.span_time = absl::Milliseconds(100);  // compression fully hidden
  EXPECT_DOUBLE_EQ(s.OverlapFraction(), 1.0);
  s.span_time = absl::Milliseconds(115);
  EXPECT_NEAR(s.OverlapFraction(), 0.5, 1e-9);
  s.span_time = absl::ZeroDuration();
  EXPECT_DOUBLE_EQ(s.OverlapFraction(), 0.0);
  s.span_time = absl::Milliseconds(115);
  EXPECT_NE(s.ToString().find("overlap 50%"), std::string::npos) << s.ToString();
}

// After the first step, a step allocates nothing in lib/: buckets,
// frames, descriptor tables, sums and codec scratch (the selection
// codecs' candidate lists and staging, owned by the ErrorFeedback and the
// SparseAllgather) are reused. What remains is the transport's
// per-call bookkeeping, measured on a bare group and subtracted: after
// its first exchange every compressed bucket makes one AllgathervBounded
// (descriptor and frame in one block), every dense one a
// SealedAllreduceSum.
class SteadyStateTest : public ::testing::TestWithParam<const char*> {};

// A one-rank group seals nothing; the sealed call still wants a MAC.
class UnusedChunkAuth : public transport::ChunkAuthenticator {
 public:
  size_t trailer_bytes() const override { return 28; }
  absl::Status Seal(absl::Span<const uint8_t>, absl::Span<const uint8_t>, uint8_t*) const override {
    return absl::InternalError("a one-rank group seals nothing");
  }
  absl::Status Verify(absl::Span<const uint8_t>, absl::Span<const uint8_t>,
                      const uint8_t*) const override {
    return absl::InternalError("a one-rank group verifies nothing");
  }
};

TEST_P(SteadyStateTest, StepsAllocateNothingInLib) {
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "bare", absl::Seconds(10));
  auto bare = *transport::GlooGroup::Create(0, 1, store, transport::GroupOptions());
  std::vector<uint8_t> mine(40), all(64);
  std::vector<uint64_t> lengths(1);
  ASSERT_TRUE(bare->AllgathervBounded(absl::MakeSpan(mine), 64, absl::MakeSpan(all),
                                      absl::MakeSpan(lengths))
                  .ok());  // warm-up
  long before = g_allocations.load();
  ASSERT_TRUE(bare->AllgathervBounded(absl::MakeSpan(mine), 64, absl::MakeSpan(all),
                                      absl::MakeSpan(lengths))
                  .ok());
  const long transport_per_bucket = g_allocations.load() - before;
  std::vector<float> floats(100);
  const UnusedChunkAuth chunk_auth;
  ASSERT_TRUE(bare->SealedAllreduceSum(absl::MakeSpan(floats), chunk_auth, {0, 0, 1}).ok());
  before = g_allocations.load();
  ASSERT_TRUE(bare->SealedAllreduceSum(absl::MakeSpan(floats), chunk_auth, {1, 0, 1}).ok());
  const long transport_per_dense = g_allocations.load() - before;

  ExchangerOptions o;
  o.bucket_bytes = 100000;
  auto ex = *GradientExchanger::Create(MakeComm(GetParam(), /*dense_below=*/1000), o);
  std::vector<std::vector<float>> t = {Ramp(30000, 1), Ramp(100, 1), Ramp(20000, 1), Ramp(50000, 1),
                                       Ramp(7, 1)};
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int step = 0; step < 4; ++step) {
    before = g_allocations.load();
    ASSERT_TRUE(ex->BeginStep(step).ok());
    for (size_t i = 0; i < t.size(); ++i) {
      ASSERT_TRUE(ex->Submit(names[i], absl::MakeSpan(t[i])).ok());
    }
    ASSERT_TRUE(ex->Flush().ok());
    ASSERT_TRUE(ex->WaitAll(absl::Seconds(10)).ok());
    const long allocations = g_allocations.load() - before;
    const ExchangeStats stats = ex->StepStats();
    ASSERT_EQ(stats.compressed_buckets, 2u) << ex->DescribePlan();
    ASSERT_EQ(stats.dense_buckets, 1u) << ex->DescribePlan();
    if (step >= 2) {
      EXPECT_EQ(allocations, static_cast<long>(stats.compressed_buckets) * transport_per_bucket +
                                 static_cast<long>(stats.dense_buckets) * transport_per_dense)
          << "step " << step << "; transport makes " << transport_per_bucket
          << " per compressed bucket, " << transport_per_dense << " per dense one";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, SteadyStateTest,
                         ::testing::Values("qsgd:bits=4,bucket=128", "topk:ratio=0.01",
                                           "approx_topk:ratio=0.01", "randomk:ratio=0.05,seed=3",
                                           "topk:ratio=0.02,values=fp16,indices=varint"));

}  // namespace
}  // namespace gradwire
