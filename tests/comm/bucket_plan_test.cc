// BucketPlan and the path rule on their own (no communicator, no threads):
// which path a tensor takes, how tensors fuse into buckets, and how later
// steps are held to the plan. GradientExchanger's use of it is in
// exchanger_test.cc, the Python binding's in tests/python.
#include "gradwire/lib/comm/bucket_plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(PathRuleTest, SizeShapeAndMethodDecide) {
  PathRule rule;  // defaults: compressing, dense below 16384, 1-D dense
  EXPECT_EQ(rule.PathFor(16383, false), ExchangePath::kDense);
  EXPECT_EQ(rule.PathFor(16384, false), ExchangePath::kCompressed);
  EXPECT_EQ(rule.PathFor(1 << 20, true), ExchangePath::kDense);  // biases, norm scales
  rule.dense_one_dimensional = false;
  EXPECT_EQ(rule.PathFor(1 << 20, true), ExchangePath::kCompressed);
  rule.dense_below_elements = 0;
  EXPECT_EQ(rule.PathFor(1, false), ExchangePath::kCompressed);
  // Method "none": nothing is compressed, whatever its size.
  rule.compressing = false;
  EXPECT_EQ(rule.PathFor(1 << 20, false), ExchangePath::kDense);
  EXPECT_STREQ(ExchangePathName(ExchangePath::kDense), "dense");
  EXPECT_STREQ(ExchangePathName(ExchangePath::kCompressed), "compressed");
}

// 80 KB buckets (20000 floats); tensors in backprop order.
TEST(BucketPlanTest, FusesPerPathAndClosesAtTheCap) {
  BucketPlan plan(PathRule(), 80000);
  const int64_t one_d[] = {10};
  const int64_t matrix[] = {100, 300};
  struct Want {
    const char* name;
    uint64_t n;
    absl::Span<const int64_t> shape;
    uint32_t bucket;
    bool closed;
  } tensors[] = {
      {"big", 30000, matrix, 0, true},  // compressed, over the cap alone
      {"bias", 10, one_d, 1, false},    // dense: 1-D
      {"w1", 16384, {}, 2, false},      // compressed: opens bucket 2
      {"w2", 16384, {}, 2, true},       // 32768 >= 20000: closes it
      {"small", 100, {}, 1, false},     // dense: below 16384
      {"empty", 0, {}, 1, false},      {"w3", 20000, {}, 3, true},  // exactly the cap closes
      {"w4", 17000, {}, 4, false},                                  // left open until Fix
  };
  for (const Want& w : tensors) {
    absl::StatusOr<BucketPlan::Added> a = plan.Add(w.name, w.n, w.shape);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->place.bucket, w.bucket) << w.name;
    EXPECT_EQ(a->closed, w.closed) << w.name;
  }
  EXPECT_FALSE(plan.fixed());
  // Fix closes the open ones (dense 1, compressed 4) in the order they opened.
  EXPECT_EQ(plan.Fix(), std::vector<uint32_t>({1, 4}));
  EXPECT_TRUE(plan.fixed());
  ASSERT_EQ(plan.bucket_count(), 5u) << plan.Describe();
  EXPECT_EQ(plan.tensor_count(), 8u);
  const PlannedBucket& dense = plan.bucket(1);
  EXPECT_EQ(dense.path, ExchangePath::kDense);
  EXPECT_EQ(dense.elements, 110u);
  ASSERT_EQ(dense.members.size(), 3u);
  EXPECT_EQ(dense.members[1].name, "small");
  EXPECT_EQ(dense.members[1].offset, 10u);  // after "bias"
  EXPECT_EQ(dense.members[2].offset, 110u);
  EXPECT_EQ(plan.bucket(2).members[1].offset, 16384u);
  std::vector<BucketInfo> info = plan.Info();
  ASSERT_EQ(info.size(), 5u);
  EXPECT_EQ(info[1].tensors, std::vector<std::string>({"bias", "small", "empty"}));
  EXPECT_EQ(info[0].path, ExchangePath::kCompressed);
  EXPECT_EQ(plan.Describe().substr(0, 39), "bucket 0: compressed, 1 tensors, 30000 ");
  // A fixed plan takes no more tensors.
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.Add("late", 5).status()));
}

TEST(BucketPlanTest, MethodNoneMakesOneDenseStream) {
  PathRule none;
  none.compressing = false;
  BucketPlan plan(none, 80000);
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(plan.Add(name, 15000).ok());
  plan.Fix();
  ASSERT_EQ(plan.bucket_count(), 2u);  // 30000 closes bucket 0; c is bucket 1
  for (const BucketInfo& b : plan.Info()) EXPECT_EQ(b.path, ExchangePath::kDense);
}

TEST(BucketPlanTest, LaterStepsAreHeldToThePlan) {
  BucketPlan plan(PathRule(), 1 << 20);
  ASSERT_TRUE(plan.Add("a", 20000).ok());
  ASSERT_TRUE(plan.Add("b", 100).ok());
  plan.Fix();
  absl::StatusOr<TensorPlace> a = plan.Expect(0, "a", 20000);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->bucket, 0u);
  absl::StatusOr<TensorPlace> b = plan.Expect(1, "b", 100);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bucket, 1u);
  // Out of order, another size, one too many: refused, saying so.
  absl::Status s = plan.Expect(0, "b", 100).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("expects \"a\" with 20000"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.Expect(1, "b", 101).status()));
  s = plan.Expect(2, "c", 1).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("has only 2"), std::string::npos) << s;
  // Find: by name.
  ASSERT_TRUE(plan.Find("b").ok());
  EXPECT_EQ(plan.member(*plan.Find("b")).size, 100u);
  EXPECT_TRUE(absl::IsNotFound(plan.Find("nope").status()));
}

TEST(BucketPlanTest, ShapesMustHoldTheirElements) {
  const int64_t shape[] = {3, 4};
  EXPECT_TRUE(BucketPlan::CheckShape("t", 12, shape).ok());
  EXPECT_TRUE(BucketPlan::CheckShape("t", 99, {}).ok());  // unknown shape
  absl::Status s = BucketPlan::CheckShape("t", 13, shape);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  const int64_t negative[] = {-1, 4};
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::CheckShape("t", 4, negative)));
  BucketPlan plan(PathRule(), 1 << 20);
  EXPECT_TRUE(absl::IsInvalidArgument(plan.Add("t", 13, shape).status()));
  EXPECT_EQ(plan.tensor_count(), 0u);  // refused, not half added
  // A product that wraps is no match, even where it wraps onto `elements`:
  // 2^32 x 2^32 is 0 mod 2^64, and 3 x 6148914691236517206 is 2.
  const int64_t wraps_to_zero[] = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::CheckShape("t", 0, wraps_to_zero)));
  const int64_t wraps_to_two[] = {3, 6148914691236517206};
  EXPECT_TRUE(absl::IsInvalidArgument(BucketPlan::CheckShape("t", 2, wraps_to_two)));
  EXPECT_TRUE(absl::IsInvalidArgument(plan.Add("t", 2, wraps_to_two).status()));
}

TEST(BucketPlanTest, BucketsCannotWrap) {
  // One compressed bucket of unbounded size: its element count is the sum.
  BucketPlan plan(PathRule(), ~uint64_t{0});
  ASSERT_TRUE(plan.Add("a", BucketPlan::kMaxBucketElements - 1).ok());
  EXPECT_TRUE(plan.Add("b", 1).ok());
  absl::StatusOr<BucketPlan::Added> over = plan.Add("c", ~uint64_t{0} - 5);
  EXPECT_TRUE(absl::IsInvalidArgument(over.status())) << over.status();
  EXPECT_EQ(plan.tensor_count(), 2u);
}

}  // namespace
}  // namespace gradwire
