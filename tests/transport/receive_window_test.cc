// ReceiveWindow: the order and number of receives a rank keeps posted in
// the direct allgatherv and AlltoallvBounded. Replays the schedule as the
// exchanges run it (post in_flight(), then one more after each completion)
// and checks: every expected source exactly once, staggered order, never
// more outstanding than the window (at least `window`, at most 8 waves),
// and the whole window used.
#include "gradwire/transport/receive_window.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace transport {
namespace {

struct Replay {
  std::vector<int> posted;
  size_t most_outstanding = 0;
};

Replay Schedule(const ReceiveWindow& w) {
  Replay r;
  size_t outstanding = 0;
  for (size_t j = 0; j < w.in_flight(); ++j) {
    r.posted.push_back(w.sources()[j]);
    r.most_outstanding = std::max(r.most_outstanding, ++outstanding);
  }
  for (size_t done = 1; done <= w.sources().size(); ++done) {
    --outstanding;  // the oldest posted receive completes
    if (const int next = w.PostAfter(done); next >= 0) {
      r.posted.push_back(next);
      r.most_outstanding = std::max(r.most_outstanding, ++outstanding);
    }
  }
  EXPECT_EQ(outstanding, 0u);
  return r;
}

TEST(ReceiveWindowTest, EverySourceOnceStaggeredNeverMoreThanTheWindow) {
  for (int size : {2, 3, 5, 8, 16, 17, 64}) {
    for (int rank : {0, 1, size - 1}) {
      for (int window : {1, 2, 4, 8, 100}) {
        const ReceiveWindow w(rank, size, window, [](int) { return true; });
        const Replay r = Schedule(w);
        ASSERT_EQ(r.posted.size(), static_cast<size_t>(size - 1));
        for (int i = 1; i < size; ++i) {
          EXPECT_EQ(r.posted[i - 1], (rank - i + size) % size) << size << " " << rank;
        }
        // At least `window`, and at most eight waves.
        const size_t want =
            std::min<size_t>(std::max<size_t>(window, (size - 1 + 7) / 8), size - 1);
        EXPECT_EQ(r.most_outstanding, want) << "size " << size << " window " << window;
        EXPECT_LE((size - 1 + want - 1) / want, 8u);
      }
    }
  }
}

TEST(ReceiveWindowTest, ZeroWindowPostsEveryReceiveAtOnce) {
  const ReceiveWindow w(3, 16, 0, [](int) { return true; });
  EXPECT_EQ(w.in_flight(), 15u);
  EXPECT_EQ(w.PostAfter(1), -1);
}

TEST(ReceiveWindowTest, OnlyExpectedSources) {
  // Peers with zero-byte blocks send nothing: no receive for them.
  const ReceiveWindow w(0, 6, 2, [](int from) { return from % 2 == 1; });
  EXPECT_EQ(w.sources(), (std::vector<int>{5, 3, 1}));
  const Replay r = Schedule(w);
  EXPECT_EQ(r.posted, (std::vector<int>{5, 3, 1}));
  EXPECT_EQ(r.most_outstanding, 2u);
  const ReceiveWindow none(2, 4, 2, [](int) { return false; });
  EXPECT_EQ(none.in_flight(), 0u);
  EXPECT_EQ(none.PostAfter(1), -1);
}

}  // namespace
}  // namespace transport
}  // namespace gradwire
