#include "gradwire/lib/comm/host_cores.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

RankCores On(uint64_t host, std::vector<int> cpus, uint64_t cgroup = 0, double quota = 0) {
  RankCores r;
  r.host = host;
  r.cgroup = cgroup;
  r.quota = quota;
  for (int c : cpus) r.cpus[c / 64] |= uint64_t{1} << (c % 64);
  return r;
}

std::vector<int> Range(int first, int count) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(first + i);
  return v;
}

TEST(HostCores, RanksOnOneHostSplitItsCpus) {
  // Four ranks free to run on both CPUs of one machine: half a core each.
  std::vector<RankCores> four(4, On(7, {0, 1}));
  for (int r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(CoresPerRank(four, r), 0.5);
  // Eight ranks pinned one to a CPU: a core each (not 1/8: the union).
  std::vector<RankCores> pinned;
  for (int c = 0; c < 8; ++c) pinned.push_back(On(7, {c}));
  EXPECT_DOUBLE_EQ(CoresPerRank(pinned, 3), 1.0);
  // One rank alone with 96 CPUs: 96 (the model counts above 1 as 1).
  std::vector<RankCores> alone = {On(7, Range(0, 96))};
  EXPECT_DOUBLE_EQ(CoresPerRank(alone, 0), 96.0);
  // CPUs past the first word count too.
  std::vector<RankCores> wide(2, On(7, {1, 70, 1000}));
  EXPECT_DOUBLE_EQ(CoresPerRank(wide, 1), 1.5);
}

TEST(HostCores, OtherHostsDoNotCount) {
  // Two hosts of two CPUs: one with three ranks, one with one.
  std::vector<RankCores> ranks = {On(1, {0, 1}), On(1, {0, 1}), On(2, {0, 1}), On(1, {0, 1})};
  EXPECT_DOUBLE_EQ(CoresPerRank(ranks, 0), 2.0 / 3);
  EXPECT_DOUBLE_EQ(CoresPerRank(ranks, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(CoresPerRank(ranks, 2), 2.0);
  // Out of range: a rank of its own core.
  EXPECT_DOUBLE_EQ(CoresPerRank(ranks, 4), 1.0);
  EXPECT_DOUBLE_EQ(CoresPerRank(ranks, -1), 1.0);
}

TEST(HostCores, QuotasAreSummedOncePerCgroup) {
  // Four ranks in one container limited to 2 cores of a 64-CPU machine.
  std::vector<RankCores> shared(4, On(1, Range(0, 64), /*cgroup=*/5, /*quota=*/2));
  EXPECT_DOUBLE_EQ(CoresPerRank(shared, 0), 0.5);
  // Four containers of one core each: a core each.
  std::vector<RankCores> own;
  for (int r = 0; r < 4; ++r) own.push_back(On(1, Range(0, 64), 10 + r, 1.0));
  EXPECT_DOUBLE_EQ(CoresPerRank(own, 2), 1.0);
  // A cgroup without a limit lifts it: the CPU sets bound.
  own.push_back(On(1, {0, 1}, 99, 0));
  EXPECT_DOUBLE_EQ(CoresPerRank(own, 0), 64.0 / 5);
  // A quota above the CPUs: the CPUs bound.
  std::vector<RankCores> big(2, On(1, {0, 1}, 5, 8));
  EXPECT_DOUBLE_EQ(CoresPerRank(big, 0), 1.0);
}

TEST(HostCores, RoundTripAndHostileBytes) {
  RankCores r = On(0x0123456789abcdefull, {0, 63, 64, 1023}, 42, 1.5);
  std::vector<uint8_t> bytes(kRankCoresBytes);
  EncodeRankCores(r, bytes.data());
  absl::StatusOr<RankCores> back = DecodeRankCores(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->host, r.host);
  EXPECT_EQ(back->cgroup, r.cgroup);
  EXPECT_EQ(back->quota, 1.5);
  EXPECT_EQ(back->cpus, r.cpus);
  EXPECT_FALSE(DecodeRankCores(absl::MakeConstSpan(bytes).subspan(1)).ok());
  bytes.push_back(0);
  EXPECT_FALSE(DecodeRankCores(bytes).ok());
  bytes.pop_back();
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    r.quota = bad;
    EncodeRankCores(r, bytes.data());
    absl::StatusOr<RankCores> refused = DecodeRankCores(bytes);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("quota"), absl::string_view::npos);
  }
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(HostCores, CgroupQuotaIsTheLeastUpTheTree) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/cgroup_quota";
  // v2: /a limits to 4 cores, /a/b to 1.5, /a/b/c sets none.
  for (const char* d : {"", "/a", "/a/b", "/a/b/c", "/x"}) mkdir((root + d).c_str(), 0755);
  Write(root + "/a/cpu.max", "400000 100000\n");
  Write(root + "/a/b/cpu.max", "150000 100000\n");
  Write(root + "/a/b/c/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/a/b/c\n", root), 1.5);
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/a\n", root), 4.0);
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/x\n", root), 0.0);        // none set
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/nowhere\n", root), 0.0);  // unreadable
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("", root), 0.0);
  Write(root + "/x/cpu.max", "garbage\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("0::/x\n", root), 0.0);
  // v1: the cpu controller's line and files, -1 for none.
  for (const char* d : {"/cpu", "/cpu/job", "/cpu/job/rank"}) mkdir((root + d).c_str(), 0755);
  Write(root + "/cpu/job/cpu.cfs_quota_us", "200000\n");
  Write(root + "/cpu/job/cpu.cfs_period_us", "100000\n");
  Write(root + "/cpu/job/rank/cpu.cfs_quota_us", "-1\n");
  Write(root + "/cpu/job/rank/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("4:memory:/m\n2:cpu,cpuacct:/job/rank\n0::/\n", root), 2.0);
  EXPECT_DOUBLE_EQ(CgroupCpuQuota("2:cpuacct:/job/rank\n", root), 0.0);  // not the cpu one
}

TEST(HostCores, ThisProcessCountsItsCpus) {
  const RankCores me = ThisRankCores();
  int cpus = 0;
  for (uint64_t w : me.cpus) cpus += __builtin_popcountll(w);
  EXPECT_GE(cpus, 1);
  EXPECT_GE(me.quota, 0);
  EXPECT_EQ(ThisRankCores().host, me.host);  // stable
  std::vector<RankCores> two(2, me);
  EXPECT_GT(CoresPerRank(two, 0), 0);
}

}  // namespace
}  // namespace gradwire
