// One of several processes reading a whole dataset from a data server
// through a DataCache whose disk tier shares its directory with the
// others (data_cache_shared_test.cc starts them).
//
//   shared_reader <port> <token> <disk_dir> <disk_budget_bytes> <seed> <epochs>
//
// Reads every sample once per epoch in its own shuffled order, through a
// prefetcher, checks every byte, and prints one line:
//   "reads R wrong W source_reads S disk_hits H"
// Exit code 0 only if every read succeeded with the exact bytes.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/data_cache.h"
#include "gradwire/lib/cache/epoch_order.h"
#include "gradwire/lib/cache/prefetcher.h"
#include "gradwire/lib/cache/remote_tier.h"
#include "gradwire/tests/cache/test_dataset.h"

int main(int argc, char** argv) {
  using namespace gradwire::cache;  // NOLINT: a test helper
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s port token disk_dir disk_budget seed epochs\n", argv[0]);
    return 2;
  }
  RemoteTier::Options ro;
  ro.target = absl::StrCat("127.0.0.1:", argv[1]);
  ro.token = argv[2];
  auto remote = RemoteTier::Connect(ro);
  if (!remote.ok()) {
    std::fprintf(stderr, "connect: %s\n", remote.status().ToString().c_str());
    return 3;
  }
  DataCache::Options o;
  o.disk_dir = argv[3];
  o.disk_budget_bytes = std::strtoull(argv[4], nullptr, 10);
  o.disk_sync = false;
  auto cache = DataCache::Create(std::shared_ptr<DataSource>(std::move(*remote)), o);
  if (!cache.ok()) {
    std::fprintf(stderr, "cache: %s\n", cache.status().ToString().c_str());
    return 4;
  }
  const uint64_t seed = std::strtoull(argv[5], nullptr, 10);
  const int epochs = std::atoi(argv[6]);
  const auto keys = (*cache)->manifest().SampleKeys();
  uint64_t reads = 0, wrong = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    (*cache)->BeginEpoch(epoch);
    Prefetcher::Options po;
    po.depth = 256;
    po.threads = 2;
    auto prefetcher = Prefetcher::ForEpoch(cache->get(), keys, seed, epoch, 0, 1, po);
    if (!prefetcher.ok()) return 5;
    auto order = EpochOrder(keys, seed, epoch, 0, 1);
    for (size_t i = 0; i < (*prefetcher)->size(); ++i) {
      auto v = (*prefetcher)->Next();
      const std::string& key = (*order)[i];
      ++reads;
      if (!v.ok()) {
        if (wrong++ < 5)
          std::fprintf(stderr, "%s: %s\n", key.c_str(), v.status().ToString().c_str());
      } else if (**v != gradwire::cache::testing::SampleBytesOf(key)) {
        if (wrong++ < 5) std::fprintf(stderr, "%s: wrong bytes\n", key.c_str());
      }
    }
  }
  (*cache)->FlushDiskWrites(absl::Seconds(30)).IgnoreError();
  uint64_t source_reads = 0, disk_hits = 0;
  for (const EpochStats& e : (*cache)->Stats()) {
    source_reads += e.remote_reads;
    disk_hits += e.disk.hits;
  }
  std::printf("reads %llu wrong %llu source_reads %llu disk_hits %llu\n",
              static_cast<unsigned long long>(reads), static_cast<unsigned long long>(wrong),
              static_cast<unsigned long long>(source_reads),
              static_cast<unsigned long long>(disk_hits));
  return wrong == 0 ? 0 : 1;
}
