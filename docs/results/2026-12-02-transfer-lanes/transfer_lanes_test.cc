// Transfer lanes (CommunicatorOptions::transfer_lanes): ranks on threads.
// The two lanes are independent Gloo contexts: one rank may run lane 1's
// transfer to its end before it starts lane 0's while its peers run both
// at once, and every rank still gets the one-lane result bit for bit. A
// GradientExchanger over two lanes gives the same bits as over one, step
// after step, with several compressed buckets and dense ones.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_store.h"
#include "gtest/gtest.h"
#include "tests/synthetic_gradient.h"

namespace gradwire {
namespace {

constexpr int kRanks = 3;

void OnEveryRank(const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(f, r);
  for (auto& t : threads) t.join();
}

// One communicator per rank (Create is collective), top-k 10 % through the
// sparse allgather. A short transport deadline: a lane that is not
// independent shows as an error, not as a hung test.
std::vector<std::unique_ptr<Communicator>> MakeWorld(int lanes) {
  static int scope = 0;
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "job", absl::Seconds(20));
  const std::string name = std::to_string(scope++);
  std::vector<std::unique_ptr<Communicator>> comms(kRanks);
  OnEveryRank([&](int r) {
    transport::GroupOptions group;
    group.timeout = absl::Seconds(5);
    auto world = transport::GlooGroup::Create(r, kRanks, store->Scoped(name), group);
    ASSERT_TRUE(world.ok()) << world.status();
    auto secret = JobSecret::FromValue("0123456789abcdef0123", "test");
    auto auth = FrameAuthenticator::Create(*secret, "job");
    CommunicatorOptions options;
    options.compression = *CompressionSpec::Parse("topk:ratio=0.1");
    options.dense_below_elements = 1000;
    options.exchange = ExchangeKind::kSparseAllgather;
    options.transfer_lanes = lanes;
    auto comm = Communicator::Create(std::move(*world), 0, 1, std::move(*auth), options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comms[r] = std::move(*comm);
  });
  return comms;
}

bool SameBits(absl::Span<const float> a, absl::Span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

TEST(TransferLanes, OptionsAreChecked) {
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "job", absl::Seconds(5));
  for (int lanes : {0, 3, -1}) {
    auto world = transport::GlooGroup::Create(0, 1, store->Scoped(std::to_string(lanes + 10)),
                                              transport::GroupOptions());
    ASSERT_TRUE(world.ok());
    auto secret = JobSecret::FromValue("0123456789abcdef0123", "test");
    CommunicatorOptions options;
    options.transfer_lanes = lanes;
    auto comm = Communicator::Create(std::move(*world), 0, 1,
                                     *FrameAuthenticator::Create(*secret, "job"), options);
    ASSERT_FALSE(comm.ok());
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(comm.status().message().find("transfer lanes must be 1 or 2"), std::string::npos)
        << comm.status();
  }
  // Ranks must agree on the lanes: they are among the checked settings.
  CommunicatorOptions one, two;
  two.transfer_lanes = 2;
  EXPECT_NE(Communicator::AgreedSettings(one), Communicator::AgreedSettings(two));
}

TEST(TransferLanes, LanesAreIndependentAndGiveTheOneLaneBits) {
  auto lanes = MakeWorld(2);
  auto one = MakeWorld(1);
  const size_t n = 30000;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(lanes[r]->transfer_lanes(), 2);
    ASSERT_EQ(one[r]->transfer_lanes(), 1);
    EXPECT_TRUE(lanes[r]->TakesLane(ExchangePath::kCompressed, n));
    EXPECT_FALSE(lanes[r]->TakesLane(ExchangePath::kDense, n));
    EXPECT_FALSE(one[r]->TakesLane(ExchangePath::kCompressed, n));
  }
  for (uint64_t step = 1; step <= 3; ++step) {
    // Buckets 1 and 2 of every rank, staged on the lane communicators.
    std::vector<std::vector<float>> got1(kRanks), got2(kRanks), want1(kRanks), want2(kRanks);
    OnEveryRank([&](int r) {
      got1[r] = want1[r] = testing::SyntheticGradient(n, 100 * step + r);
      got2[r] = want2[r] = testing::SyntheticGradient(n, 100 * step + 50 + r);
      Communicator::StagedBucket f1, f2;
      ExchangeStats cost;
      ASSERT_TRUE(lanes[r]->EncodeStage(1, step, absl::MakeSpan(got1[r]), f1, &cost).ok());
      ASSERT_TRUE(lanes[r]->EncodeStage(2, step, absl::MakeSpan(got2[r]), f2, &cost).ok());
      absl::Status s1, s2;
      if (r == 0) {
        // Lane 1 to its end first, then lane 0: the peers' lane 0 call
        // waits meanwhile, which one shared context could not allow.
        s2 = lanes[r]->TransferStage(f2, &cost, 1);
        s1 = lanes[r]->TransferStage(f1, &cost, 0);
      } else {
        std::thread lane1([&] { s2 = lanes[r]->TransferStage(f2, nullptr, 1); });
        s1 = lanes[r]->TransferStage(f1, &cost, 0);
        lane1.join();
      }
      ASSERT_TRUE(s1.ok()) << "rank " << r << ": " << s1;
      ASSERT_TRUE(s2.ok()) << "rank " << r << ": " << s2;
      ASSERT_TRUE(lanes[r]->FinishStage(f1, absl::MakeSpan(got1[r]), &cost).ok());
      ASSERT_TRUE(lanes[r]->FinishStage(f2, absl::MakeSpan(got2[r]), &cost).ok());
    });
    // The same buckets, one at a time, on one lane.
    OnEveryRank([&](int r) {
      ASSERT_TRUE(
          one[r]->AllreduceMean(1, step, absl::MakeSpan(want1[r]), ExchangePath::kCompressed).ok());
      ASSERT_TRUE(
          one[r]->AllreduceMean(2, step, absl::MakeSpan(want2[r]), ExchangePath::kCompressed).ok());
    });
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(SameBits(got1[r], want1[r])) << "rank " << r << " step " << step;
      EXPECT_TRUE(SameBits(got2[r], want2[r])) << "rank " << r << " step " << step;
    }
  }
  // Staged calls do not poison; the communicators close in order.
  OnEveryRank([&](int r) {
    EXPECT_TRUE(lanes[r]->health().ok());
    EXPECT_TRUE(lanes[r]->Close().ok());
    EXPECT_TRUE(one[r]->Close().ok());
  });
}

TEST(TransferLanes, CastBucketsAndDenseOnesKeepLaneZero) {
  // TransferStage refuses lane 1 for what TakesLane refuses (no lane, or
  // a bucket of the cast allreduce): a caller bug, not a hang.
  auto one = MakeWorld(1);
  OnEveryRank([&](int r) {
    std::vector<float> g = testing::SyntheticGradient(5000, r);
    Communicator::StagedBucket f;
    ExchangeStats cost;
    ASSERT_TRUE(one[r]->EncodeStage(1, 1, absl::MakeSpan(g), f, &cost).ok());
    absl::Status s = one[r]->TransferStage(f, &cost, 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    ASSERT_TRUE(one[r]->TransferStage(f, &cost, 0).ok());
    ASSERT_TRUE(one[r]->FinishStage(f, absl::MakeSpan(g), &cost).ok());
  });
}

// The exchanger over two lanes against one lane: six compressed buckets a
// step (the lanes take them in turn) and dense tensors, four steps, the
// same bits on every rank.
TEST(TransferLanes, ExchangerGivesTheOneLaneBits) {
  std::vector<std::vector<std::vector<float>>> results[2];
  for (int lanes : {1, 2}) {
    auto comms = MakeWorld(lanes);
    std::vector<std::vector<std::vector<float>>>& out = results[lanes - 1];
    out.resize(kRanks);
    OnEveryRank([&](int r) {
      ExchangerOptions eo;
      eo.bucket_bytes = 40000;  // 10K floats: every weight its own bucket
      auto ex = GradientExchanger::Create(std::move(comms[r]), eo);
      ASSERT_TRUE(ex.ok()) << ex.status();
      std::vector<std::vector<float>> grads;
      for (uint64_t step = 1; step <= 4; ++step) {
        grads.clear();
        ASSERT_TRUE((*ex)->BeginStep(step).ok());
        for (int t = 0; t < 8; ++t) {
          // Six 2-D weights of 12K elements, two biases (dense).
          const bool bias = t % 4 == 3;
          const size_t n = bias ? 300 : 12000;
          grads.push_back(testing::SyntheticGradient(n, 1000 * step + 10 * t + r));
          const int64_t rows = bias ? 300 : 120;
          std::vector<int64_t> shape = bias ? std::vector<int64_t>{rows}
                                            : std::vector<int64_t>{rows, 100};
          ASSERT_TRUE((*ex)
                          ->Submit("t" + std::to_string(t), absl::MakeSpan(grads.back()), shape)
                          .ok());
        }
        ASSERT_TRUE((*ex)->Flush().ok());
        absl::Status s = (*ex)->WaitAll(absl::Seconds(10));
        ASSERT_TRUE(s.ok()) << "lanes " << lanes << " rank " << r << ": " << s;
        for (auto& g : grads) out[r].push_back(g);
      }
      EXPECT_TRUE((*ex)->Close(absl::Seconds(10)).ok());
    });
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(results[0][r].size(), results[1][r].size());
    ASSERT_EQ(results[0][r].size(), 32u);
    for (size_t i = 0; i < results[0][r].size(); ++i) {
      EXPECT_TRUE(SameBits(results[0][r][i], results[1][r][i])) << "rank " << r << " tensor " << i;
    }
  }
}

}  // namespace
}  // namespace gradwire
