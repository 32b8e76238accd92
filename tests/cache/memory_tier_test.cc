#include "gradwire/lib/cache/memory_tier.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

std::string Value(int i) { return std::string(100 + i % 37, static_cast<char>('a' + i % 26)); }

TEST(MemoryTierTest, ReturnsExactBytesAndMisses) {
  MemoryTier tier({1 << 20, EvictionPolicy::kFillOnce, 4, nullptr});
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(tier.Insert(absl::StrCat("k", i), MakeBlob(Value(i))).ok());
  for (int i = 0; i < 100; ++i) {
    auto v = tier.Lookup(absl::StrCat("k", i));
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(**v, Value(i));
  }
  EXPECT_TRUE(absl::IsNotFound(tier.Lookup("absent").status()));
  EXPECT_EQ(tier.entry_count(), 100u);
}

TEST(MemoryTierTest, FillOnceStopsAtBudgetAndNeverEvicts) {
  MemoryTier tier({10000, EvictionPolicy::kFillOnce, 16, nullptr});
  int admitted = 0;
  for (int i = 0; i < 200; ++i) {
    absl::Status s = tier.Insert(absl::StrCat("k", i), MakeBlob(std::string(100, 'x')));
    if (s.ok()) {
      ++admitted;
    } else {
      EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    }
  }
  EXPECT_LE(tier.used_bytes(), 10000u);
  // Charge = value + key + 64 bytes: full means the next one would not fit.
  EXPECT_GT(tier.used_bytes() + 100 + 4 + 64, 10000u);
  EXPECT_GT(admitted, 50);
  // The first ones stay: nothing was evicted.
  EXPECT_TRUE(tier.Contains("k0"));
}

TEST(MemoryTierTest, ObjectLargerThanBudgetIsOutOfRange) {
  MemoryTier tier({1000, EvictionPolicy::kFillOnce, 1, nullptr});
  absl::Status s = tier.Insert("big", MakeBlob(std::string(5000, 'x')));
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_NE(s.message().find("budget"), absl::string_view::npos);
}

TEST(MemoryTierTest, LruEvictsLeastRecentAndHandsVictimsOver) {
  std::vector<std::string> evicted;
  MemoryTier tier({3 * (100 + 2 + 64), EvictionPolicy::kLru, 1,
                   [&](const std::string& k, const Blob&) { evicted.push_back(k); }});
  for (const char* k : {"k1", "k2", "k3"})
    ASSERT_TRUE(tier.Insert(k, MakeBlob(std::string(100, 'x'))).ok());
  ASSERT_TRUE(tier.Lookup("k1").ok());  // k2 is now the least recent
  ASSERT_TRUE(tier.Insert("k4", MakeBlob(std::string(100, 'y'))).ok());
  EXPECT_EQ(evicted, std::vector<std::string>{"k2"});
  EXPECT_FALSE(tier.Contains("k2"));
  EXPECT_TRUE(tier.Contains("k1"));
}

TEST(MemoryTierTest, ReaderKeepsBytesOfAnEvictedEntry) {
  MemoryTier tier({200, EvictionPolicy::kLru, 1, nullptr});
  ASSERT_TRUE(tier.Insert("a", MakeBlob(std::string(100, 'a'))).ok());
  auto held = tier.Lookup("a");
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(tier.Insert("b", MakeBlob(std::string(100, 'b'))).ok());  // evicts a
  EXPECT_FALSE(tier.Contains("a"));
  EXPECT_EQ(**held, std::string(100, 'a'));
}

TEST(MemoryTierTest, ConcurrentReadersAndWritersSeeExactBytes) {
  for (EvictionPolicy policy : {EvictionPolicy::kFillOnce, EvictionPolicy::kLru}) {
    MemoryTier tier({64 * 1024, policy, 8, nullptr});
    std::atomic<int> wrong{0}, hits{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int n = 0; n < 20000; ++n) {
          int i = (n * 7 + t * 13) % 1000;
          std::string key = absl::StrCat("k", i);
          auto v = tier.Lookup(key);
          if (v.ok()) {
            ++hits;
            if (**v != Value(i)) ++wrong;
          } else {
            tier.Insert(key, MakeBlob(Value(i))).IgnoreError();
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(hits.load(), 0);
    EXPECT_LE(tier.used_bytes(), 64u * 1024);
  }
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
