// Reports DiskTier publish throughput (single Insert vs InsertBatch group
// commit). Prints figures; asserts only that every entry reads back.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gradwire/lib/cache/disk_tier.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

TEST(DiskTierThroughputTest, GroupCommitVersusOneSyncPerEntry) {
  const int n = 500;
  for (bool batched : {false, true}) {
    DiskTier::Options o;
    o.dir = testing::MakeTempDir("throughput");
    o.budget_bytes = 1 << 28;
    o.dataset_version = 1;
    auto tier = DiskTier::Open(o);
    ASSERT_TRUE(tier.ok());
    std::vector<std::pair<std::string, Blob>> entries;
    for (int i = 0; i < n; ++i) {
      entries.emplace_back(Manifest::SampleKey("train", i),
                           MakeBlob(testing::SampleBytes("train", i, 785)));
    }
    absl::Time t0 = absl::Now();
    if (batched) {
      for (size_t i = 0; i < entries.size(); i += 512) {
        std::vector<std::pair<std::string, Blob>> part(
            entries.begin() + i, entries.begin() + std::min(entries.size(), i + 512));
        for (const absl::Status& s : (*tier)->InsertBatch(part)) ASSERT_TRUE(s.ok()) << s;
      }
    } else {
      for (const auto& [k, v] : entries) ASSERT_TRUE((*tier)->Insert(k, v).ok());
    }
    double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    std::printf("%s: %.0f entries/s\n",
                batched ? "InsertBatch (syncfs)" : "Insert (fdatasync each)", n / seconds);
    for (const auto& [k, v] : entries) ASSERT_EQ(**(*tier)->Lookup(k), *v);
  }
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
