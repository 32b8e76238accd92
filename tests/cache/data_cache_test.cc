// DataCache + Prefetcher over a DirectorySource: exact bytes through every
// tier, hit rates of fill-once vs LRU, corruption refetch, full tiers,
// oversized objects, version pinning.
#include "gradwire/lib/cache/data_cache.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/epoch_order.h"
#include "gradwire/lib/cache/prefetcher.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

using testing::ListDir;
using testing::MakeTempDir;
using testing::PackSynthetic;
using testing::SampleBytes;
using testing::SampleBytesOf;

struct Fixture {
  std::string data_dir;
  Manifest manifest;
  std::shared_ptr<DataSource> source;
};

Fixture MakeFixture(uint64_t train, uint64_t test, size_t per_shard = 256) {
  Fixture f;
  f.data_dir = MakeTempDir("data");
  f.manifest = PackSynthetic(f.data_dir, train, test, per_shard);
  auto source = DirectorySource::Open(f.data_dir);
  EXPECT_TRUE(source.ok()) << source.status();
  f.source = std::shared_ptr<DataSource>(std::move(*source));
  return f;
}

std::unique_ptr<DataCache> MakeCache(const Fixture& f, DataCache::Options o) {
  auto cache = DataCache::Create(f.source, o);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return cache.ok() ? *std::move(cache) : nullptr;
}

TEST(EpochOrderTest, RanksPartitionEachEpochAndEpochsDiffer) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1003; ++i) keys.push_back(absl::StrCat("k", i));
  std::multiset<std::string> seen;
  for (int r = 0; r < 4; ++r) {
    auto order = EpochOrder(keys, 7, 1, r, 4);
    ASSERT_TRUE(order.ok());
    seen.insert(order->begin(), order->end());
  }
  EXPECT_EQ(seen, std::multiset<std::string>(keys.begin(), keys.end()));
  EXPECT_NE(*EpochOrder(keys, 7, 1, 0, 1), *EpochOrder(keys, 7, 2, 0, 1));
  EXPECT_EQ(*EpochOrder(keys, 7, 1, 0, 1), *EpochOrder(keys, 7, 1, 0, 1));
  EXPECT_TRUE(absl::IsInvalidArgument(EpochOrder(keys, 7, 1, 4, 4).status()));
}

// Sticky shards: the ranks still partition every epoch, each rank reads the
// same set every epoch (what its own tiers can keep), in a new order. The
// reshuffling order gives a rank a different set each epoch: the issue-18
// cause, kept here as the contrast.
TEST(EpochOrderTest, StickyShardsKeepEachRanksSetAcrossEpochs) {
  std::vector<std::string> keys;
  for (int i = 0; i < 1003; ++i) keys.push_back(absl::StrCat("k", i));
  std::vector<std::set<std::string>> first(4);
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    std::multiset<std::string> seen;
    for (int r = 0; r < 4; ++r) {
      auto order = StickyEpochOrder(keys, 7, epoch, r, 4);
      ASSERT_TRUE(order.ok());
      EXPECT_EQ(order->size(), r < 3 ? 251u : 250u);
      seen.insert(order->begin(), order->end());
      std::set<std::string> set(order->begin(), order->end());
      if (epoch == 1) {
        first[r] = set;
      } else {
        EXPECT_EQ(set, first[r]) << "rank " << r << " epoch " << epoch;
        EXPECT_NE(*order, *StickyEpochOrder(keys, 7, epoch - 1, r, 4));
      }
    }
    EXPECT_EQ(seen, std::multiset<std::string>(keys.begin(), keys.end()));
  }
  EXPECT_NE(*StickyEpochOrder(keys, 7, 1, 0, 4), *StickyEpochOrder(keys, 8, 1, 0, 4));
  auto a = *EpochOrder(keys, 7, 1, 0, 4), b = *EpochOrder(keys, 7, 2, 0, 4);
  EXPECT_NE(std::set<std::string>(a.begin(), a.end()), std::set<std::string>(b.begin(), b.end()));
  EXPECT_TRUE(absl::IsInvalidArgument(StickyEpochOrder(keys, 7, 1, 4, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(StickyEpochOrder(keys, 7, 1, 0, 0).status()));
}

TEST(DataCacheTest, ConcurrentReadersGetExactSourceBytesFromEveryTier) {
  Fixture f = MakeFixture(2000, 0);
  DataCache::Options o;
  o.memory_budget_bytes = 60 * 1000;  // ~1/4 of the data: all three levels serve
  o.disk_dir = MakeTempDir("cache");
  o.disk_budget_bytes = 200 * 1000;
  o.disk_write_queue_bytes = 0;  // synchronous, so the second pass hits disk
  auto cache = MakeCache(f, o);
  std::vector<std::string> keys = f.manifest.SampleKeys();
  for (int pass = 0; pass < 2; ++pass) {
    cache->BeginEpoch(pass);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < keys.size(); i += 4) {
          auto v = cache->Get(keys[i]);
          if (!v.ok() || **v != SampleBytesOf(keys[i])) ++wrong;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
  }
  std::vector<EpochStats> stats = cache->Stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[1].reads, keys.size());
  EXPECT_GT(stats[1].memory.hits, 0u);
  EXPECT_GT(stats[1].disk.hits, 0u);
  EXPECT_GT(stats[1].remote_reads, 0u);
  EXPECT_EQ(stats[1].memory.hits + stats[1].disk.hits + stats[1].remote_reads, keys.size());
  std::printf("%s", cache->FormatStats().c_str());
}

// Hit rate from epoch 2 on equals the cached fraction (fill-once), within
// 0.5 points; LRU's figure with the same budget is reported beside it.
TEST(DataCacheTest, FillOnceHitsExactlyTheCachedFractionLruDoesNot) {
  Fixture f = MakeFixture(6000, 0);
  std::vector<std::string> keys = f.manifest.SampleKeys();
  uint64_t data_bytes = 0;
  for (const auto& k : keys)
    data_bytes += SampleBytesOf(k).size() + k.size() + 64;  // memory charge
  for (double fraction : {0.25, 0.5}) {
    double hit[2] = {0, 0};
    for (EvictionPolicy policy : {EvictionPolicy::kFillOnce, EvictionPolicy::kLru}) {
      DataCache::Options o;
      o.memory_budget_bytes = static_cast<uint64_t>(fraction * data_bytes);
      o.memory_policy = policy;
      o.memory_shards = 1;
      auto cache = MakeCache(f, o);
      for (int epoch = 1; epoch <= 3; ++epoch) {
        cache->BeginEpoch(epoch);
        Prefetcher::Options p;
        p.depth = 256;
        p.threads = 2;
        Prefetcher prefetcher(cache.get(), *EpochOrder(keys, 99, epoch, 0, 1), p);
        for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(prefetcher.Next().ok());
        EXPECT_TRUE(absl::IsOutOfRange(prefetcher.Next().status()));
      }
      cache->EndEpoch();
      std::vector<EpochStats> s = cache->Stats();
      double cached = double(cache->memory()->entry_count()) / keys.size();
      for (int e = 1; e < 3; ++e) {
        if (policy == EvictionPolicy::kFillOnce) {
          EXPECT_NEAR(s[e].cache_hit_rate(), cached, 0.005) << "epoch " << e + 1;
          EXPECT_NEAR(cached, fraction, 0.02);
          // Remote bytes of the epoch: at most (1 - cached) of the data + 1 %.
          uint64_t raw = 0;
          for (const auto& k : keys) raw += SampleBytesOf(k).size();
          EXPECT_LE(s[e].remote_bytes, (1 - cached) * raw + 0.01 * raw);
        }
      }
      hit[policy == EvictionPolicy::kLru] = (s[1].cache_hit_rate() + s[2].cache_hit_rate()) / 2;
      if (policy == EvictionPolicy::kFillOnce) {
        std::printf("fraction %.2f: cached %.4f\n", fraction, cached);
      }
    }
    std::printf("fraction %.2f: epoch 2-3 hit rate fill_once %.2f%%, lru %.2f%%\n", fraction,
                100 * hit[0], 100 * hit[1]);
    EXPECT_LT(hit[1], hit[0] - 0.05) << "LRU should hit markedly less under shuffling";
  }
}

TEST(DataCacheTest, CorruptDiskEntriesAreDetectedQuarantinedAndRefetched) {
  Fixture f = MakeFixture(1000, 0);
  DataCache::Options o;
  o.disk_dir = MakeTempDir("cache");
  o.disk_budget_bytes = 1 << 24;
  o.disk_write_queue_bytes = 0;
  auto cache = MakeCache(f, o);
  std::vector<std::string> keys = f.manifest.SampleKeys();
  for (const auto& k : keys) ASSERT_TRUE(cache->Get(k).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string path =
        absl::StrCat(o.disk_dir, "/", DiskTier::EntryFileName(f.manifest.version(), keys[i]));
    int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    off_t at = lseek(fd, 0, SEEK_END) - 1 - static_cast<off_t>(i % 50);  // in the value
    char c;
    ASSERT_EQ(pread(fd, &c, 1, at), 1);
    c = ~c;
    ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
    close(fd);
  }
  cache->BeginEpoch(1);
  for (const auto& k : keys) {
    auto v = cache->Get(k);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(**v, SampleBytesOf(k));  // the refetched source bytes, never the corrupt ones
  }
  EpochStats s = cache->Stats().back();
  EXPECT_EQ(s.disk.corrupt, keys.size());
  EXPECT_EQ(s.remote_reads, keys.size());
  EXPECT_EQ(cache->disk()->quarantined(), keys.size());
  // Refetched bytes were written back: the next epoch is all disk hits.
  cache->BeginEpoch(2);
  for (const auto& k : keys) ASSERT_EQ(**cache->Get(k), SampleBytesOf(k));
  EXPECT_EQ(cache->Stats().back().disk.hits, keys.size());
}

TEST(DataCacheTest, StaleCacheIsNotServedForANewDatasetVersion) {
  std::string disk_dir = MakeTempDir("cache");
  std::string data_dir = MakeTempDir("data");
  DataCache::Options o;
  o.disk_dir = disk_dir;
  o.disk_budget_bytes = 1 << 24;
  o.disk_write_queue_bytes = 0;
  {
    PackSynthetic(data_dir, 100, 0, 50, 100);
    auto source = DirectorySource::Open(data_dir);
    auto cache = DataCache::Create(std::shared_ptr<DataSource>(std::move(*source)), o);
    ASSERT_TRUE(cache.ok());
    ASSERT_EQ(**(*cache)->Get("train/5"), SampleBytes("train", 5, 100));
  }
  // The dataset changes (new bytes under the same keys): new version.
  PackSynthetic(data_dir, 100, 0, 50, 120);
  auto source = DirectorySource::Open(data_dir);
  ASSERT_TRUE(source.ok());
  auto cache = DataCache::Create(std::shared_ptr<DataSource>(std::move(*source)), o);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->disk()->open_report().stale_removed, 1u);
  EXPECT_EQ(**(*cache)->Get("train/5"), SampleBytes("train", 5, 120));
}

TEST(DataCacheTest, ObjectLargerThanEveryBudgetIsServedAndReported) {
  Fixture f = MakeFixture(600, 0, 300);  // shards of ~50 KB
  DataCache::Options o;
  o.memory_budget_bytes = 10 * 1000;
  o.disk_dir = MakeTempDir("cache");
  o.disk_budget_bytes = 10 * 1000;
  o.disk_write_queue_bytes = 0;
  auto cache = MakeCache(f, o);
  auto shard = cache->Get("train-00000.gws");
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ((*shard)->size(), f.manifest.FindShard("train-00000.gws")->bytes);
  EpochStats s = cache->Stats().back();
  EXPECT_EQ(s.memory.rejected_too_big, 1u);
  EXPECT_EQ(s.disk.rejected_too_big, 1u);
  EXPECT_EQ(cache->memory()->used_bytes(), 0u);
}

TEST(DataCacheTest, MissingKeyIsNotFound) {
  Fixture f = MakeFixture(10, 0);
  DataCache::Options o;
  o.memory_budget_bytes = 1 << 20;
  auto cache = MakeCache(f, o);
  auto v = cache->Get("train/10");
  EXPECT_TRUE(absl::IsNotFound(v.status())) << v.status();
  EXPECT_TRUE(absl::IsNotFound(cache->Get("no-such-shard").status()));
}

// Full disk: a tiny tmpfs (we are root) or, where mounting is not allowed,
// a budget. Reads fall back to the source; nothing corrupt is left.
TEST(DataCacheTest, FullDiskFallsBackWithoutCorruption) {
  Fixture f = MakeFixture(2000, 0);
  std::string mnt = MakeTempDir("tmpfs");
  bool mounted = mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") == 0;
  if (!mounted)
    std::printf("tmpfs mount refused (%s): using a 64 KB budget instead\n", strerror(errno));
  DataCache::Options o;
  o.disk_dir = mnt + "/cache";
  o.disk_budget_bytes = mounted ? (1 << 24) : 64 * 1024;  // tmpfs: the disk fills first
  o.disk_write_queue_bytes = 0;
  {
    auto cache = MakeCache(f, o);
    std::vector<std::string> keys = f.manifest.SampleKeys();
    for (int epoch = 0; epoch < 2; ++epoch) {
      cache->BeginEpoch(epoch);
      for (const auto& k : keys) {
        auto v = cache->Get(k);
        ASSERT_TRUE(v.ok()) << v.status();
        ASSERT_EQ(**v, SampleBytesOf(k));
      }
    }
    EpochStats s = cache->Stats()[0];
    std::printf("full disk: %llu inserts, %llu rejected full, %llu write errors\n",
                (unsigned long long)s.disk.inserts, (unsigned long long)s.disk.rejected_full,
                (unsigned long long)s.disk.write_errors);
    EXPECT_GT(s.disk.inserts, 0u);
    EXPECT_GT(s.disk.rejected_full, 0u);  // ENOSPC is reported as ResourceExhausted
    EXPECT_GT(cache->Stats()[1].disk.hits, 0u);
  }
  // Reopen: every entry intact, no temp files.
  DiskTier::Options d;
  d.dir = o.disk_dir;
  d.budget_bytes = o.disk_budget_bytes;
  d.dataset_version = f.manifest.version();
  auto tier = DiskTier::Open(d);
  ASSERT_TRUE(tier.ok());
  EXPECT_EQ((*tier)->open_report().corrupt_quarantined, 0u);
  EXPECT_EQ((*tier)->open_report().temp_files_removed, 0u);
  EXPECT_GT((*tier)->entry_count(), 0u);
  if (mounted) umount2(mnt.c_str(), MNT_DETACH);
}

// An entry LRU evicts from memory is demoted to disk, not dropped from
// every local tier.
TEST(DataCacheTest, MemoryEvictionDemotesToDisk) {
  Fixture f = MakeFixture(300, 0);
  DataCache::Options o;
  o.memory_budget_bytes = 50 * 250;  // ~50 entries
  o.memory_policy = EvictionPolicy::kLru;
  o.memory_shards = 1;
  o.disk_dir = MakeTempDir("cache");
  o.disk_budget_bytes = 1 << 24;
  o.disk_write_queue_bytes = 0;
  auto cache = MakeCache(f, o);
  std::vector<std::string> keys = f.manifest.SampleKeys();
  for (const auto& k : keys) ASSERT_TRUE(cache->Get(k).ok());
  for (const auto& k : keys) {
    EXPECT_TRUE(cache->memory()->Contains(k) || cache->disk()->Contains(k)) << k;
  }
  EXPECT_LT(cache->memory()->entry_count(), keys.size());
}

TEST(PrefetcherTest, ForEpochReadsThisRanksShareInOrder) {
  Fixture f = MakeFixture(1000, 0);
  DataCache::Options o;
  o.memory_budget_bytes = 1 << 20;
  auto cache = MakeCache(f, o);
  std::vector<std::string> keys = f.manifest.SampleKeys();
  auto prefetcher = Prefetcher::ForEpoch(cache.get(), keys, 11, 2, 1, 3, Prefetcher::Options());
  ASSERT_TRUE(prefetcher.ok());
  std::vector<std::string> expected = *EpochOrder(keys, 11, 2, 1, 3);
  EXPECT_EQ((*prefetcher)->size(), expected.size());
  for (const std::string& key : expected) ASSERT_EQ(**(*prefetcher)->Next(), SampleBytesOf(key));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Prefetcher::ForEpoch(cache.get(), keys, 11, 2, 3, 3, Prefetcher::Options()).status()));
}

TEST(PrefetcherTest, DeliversOrderAndShutsDownEarly) {
  Fixture f = MakeFixture(3000, 0);
  DataCache::Options o;
  o.memory_budget_bytes = 1 << 20;
  auto cache = MakeCache(f, o);
  std::vector<std::string> order = *EpochOrder(f.manifest.SampleKeys(), 3, 1, 1, 2);
  {
    Prefetcher::Options p;  // automatic depth
    p.threads = 3;
    p.min_depth = 8;
    Prefetcher prefetcher(cache.get(), order, p);
    for (const std::string& key : order) {
      auto v = prefetcher.Next();
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_EQ(**v, SampleBytesOf(key));
    }
    EXPECT_TRUE(absl::IsOutOfRange(prefetcher.Next().status()));
  }
  {
    Prefetcher::Options p;
    p.depth = 64;
    Prefetcher prefetcher(cache.get(), order, p);
    ASSERT_TRUE(prefetcher.Next().ok());
    // Destroyed with most of the epoch unread: must join promptly.
  }
  EXPECT_EQ(Prefetcher::DepthFor(absl::Milliseconds(20), 25e6, 785, 1, 1 << 20), 637u);
  EXPECT_EQ(Prefetcher::DepthFor(absl::Milliseconds(20), 25e6, 785, 1, 100), 100u);
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
