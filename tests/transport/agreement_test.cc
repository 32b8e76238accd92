// The agreement round's record and verdicts (transport/agreement.h): the
// descriptor's wire layout, mismatch wording, and the naming of ranks that
// did not arrive. The round itself runs in transport_test.py.
#include "gradwire/transport/agreement.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace transport {
namespace {

TEST(CallDescriptorTest, LittleEndianLayoutRoundTrips) {
  CallDescriptor d;
  d.op = kAllgatherv;
  d.count = 0x0102030405060708ull;
  d.shared = 0xfedcba9876543210ull;
  d.value = kArgsBad | kCached;
  for (size_t i = 0; i < CallDescriptor::kPayloadBytes; ++i) d.payload[i] = static_cast<uint8_t>(i);
  uint8_t wire[CallDescriptor::kEncodedBytes];
  d.EncodeTo(wire);
  EXPECT_EQ(wire[0], kAllgatherv);
  EXPECT_EQ(wire[8], 0x08);  // count, low byte first
  EXPECT_EQ(wire[15], 0x01);
  EXPECT_EQ(wire[16], 0x10);  // shared
  EXPECT_EQ(wire[24], kArgsBad | kCached);
  EXPECT_EQ(wire[32], 0);  // payload
  EXPECT_EQ(wire[CallDescriptor::kEncodedBytes - 1], CallDescriptor::kPayloadBytes - 1);
  const CallDescriptor back = CallDescriptor::DecodeFrom(wire);
  EXPECT_EQ(back.op, d.op);
  EXPECT_EQ(back.count, d.count);
  EXPECT_EQ(back.shared, d.shared);
  EXPECT_EQ(back.value, d.value);
  EXPECT_EQ(std::memcmp(back.payload, d.payload, CallDescriptor::kPayloadBytes), 0);
}

TEST(HashTableTest, DependsOnEveryEntryAndTheLength) {
  const std::vector<uint64_t> table = {10, 20, 30};
  EXPECT_EQ(HashTable(table), HashTable(std::vector<uint64_t>{10, 20, 30}));
  EXPECT_NE(HashTable(table), HashTable(std::vector<uint64_t>{10, 20, 31}));
  EXPECT_NE(HashTable(table), HashTable(std::vector<uint64_t>{20, 10, 30}));
  EXPECT_NE(HashTable(std::vector<uint64_t>{0}), HashTable(std::vector<uint64_t>{0, 0}));
}

std::vector<CallDescriptor> Same(int n, CallDescriptor d) {
  return std::vector<CallDescriptor>(n, d);
}

TEST(CheckSameTest, NamesTheRanksOnEachSide) {
  const std::vector<int> world = {4, 5, 6, 7};  // a sub-group: errors use world numbers
  std::vector<CallDescriptor> all = Same(4, CallDescriptor{kAllgatherv, 10, 99, 0});
  EXPECT_TRUE(CheckSame(all, world, "allgatherv", /*value_is_flags=*/true).ok());

  all[3].op = kBarrier;
  absl::Status s = CheckSame(all, world, "allgatherv", true);
  EXPECT_EQ(s.message(),
            "collective mismatch: ranks [4, 5, 6] called allgatherv; rank 7 called barrier");

  all[3] = all[0];
  all[1].value = kArgsBad;
  s = CheckSame(all, world, "allgatherv", true);
  EXPECT_EQ(s.message(), "collective mismatch in allgatherv: rank 5 passed invalid arguments");
  // Where the value is data, kArgsBad's bit means nothing.
  EXPECT_TRUE(CheckSame(all, world, "allgatherv", /*value_is_flags=*/false).ok());

  all[1] = all[0];
  all[2].shared = 98;
  s = CheckSame(all, world, "allgatherv", true);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("ranks disagree on shared arguments"), absl::string_view::npos);
  EXPECT_NE(s.message().find("rank 6 vs ranks [4, 5, 7]"), absl::string_view::npos) << s;
}

TEST(CheckSameLengthTest, WordsADisagreementAsLengths) {
  const std::vector<int> world = {0, 1, 2};
  std::vector<CallDescriptor> all = Same(3, CallDescriptor{kAllreduceRing, 100, 100, 0});
  all[2].count = all[2].shared = 50;
  EXPECT_EQ(CheckSameLength(all, world, "allreduce_ring", "elements").message(),
            "collective mismatch in allreduce_ring: rank 2 passes 50 elements; ranks [0, 1] pass "
            "100 elements");
}

TEST(NameMissingTest, DeadlineNamesWhoDidAndDidNotArrive) {
  const std::vector<int> world = {0, 1, 2, 3};
  const std::vector<Arrival> arrivals = {Arrival::kArrived, Arrival::kArrived, Arrival::kMissing,
                                         Arrival::kArrived};
  const absl::Status timeout = absl::DeadlineExceededError(
      "allgather: agreement round: [gloo] Timed out waiting 30000ms for recv operation");
  const absl::Status s =
      NameMissing(timeout, "allgather: agreement round", arrivals, world, absl::Seconds(30));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s));
  EXPECT_EQ(s.message(),
            "allgather: agreement round: rank 2 did not arrive within 30s (ranks [0, 1, 3] did)");
}

TEST(NameMissingTest, OtherFailuresKeepCodeAndCause) {
  const std::vector<int> world = {8, 9, 10};
  const std::vector<Arrival> arrivals = {Arrival::kMissing, Arrival::kArrived, Arrival::kUnknown};
  const absl::Status closed =
      absl::UnavailableError("allgatherv (direct): Connection closed by peer [10.0.0.8]:4000");
  const absl::Status s =
      NameMissing(closed, "allgatherv (direct)", arrivals, world, absl::Seconds(2));
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(s.message(),
            "allgatherv (direct): rank 8 did not arrive (rank 9 did; nothing is known of rank "
            "10): Connection closed by peer [10.0.0.8]:4000");
}

TEST(NameMissingTest, NothingMissingLeavesTheFailureAlone) {
  const absl::Status failure = absl::DeadlineExceededError("x: send timed out");
  const std::vector<Arrival> arrivals(3, Arrival::kArrived);
  EXPECT_EQ(NameMissing(failure, "x", arrivals, {0, 1, 2}, absl::Seconds(1)), failure);
}

TEST(NameMissingTest, ManyPresentRanksAreCounted) {
  std::vector<int> world(40);
  std::iota(world.begin(), world.end(), 0);
  std::vector<Arrival> arrivals(40, Arrival::kArrived);
  arrivals[7] = arrivals[31] = Arrival::kMissing;
  const absl::Status s = NameMissing(absl::DeadlineExceededError("barrier: agreement round: t"),
                                     "barrier: agreement round", arrivals, world, absl::Minutes(2));
  EXPECT_EQ(s.message(),
            "barrier: agreement round: ranks [7, 31] did not arrive within 2m (38 ranks did)");
}

}  // namespace
}  // namespace transport
}  // namespace gradwire
