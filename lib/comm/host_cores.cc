#include "gradwire/lib/comm/host_cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

// The whole file, or "" where it cannot be read.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Cores a cgroup's files allow, 0 for none: v2's cpu.max ("max 100000" or
// "200000 100000"), else v1's cpu.cfs_quota_us (-1: none) over
// cpu.cfs_period_us.
double QuotaIn(const std::string& dir) {
  const std::string max = ReadFile(dir + "/cpu.max");
  if (!max.empty()) {
    std::vector<absl::string_view> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(max), ' ', absl::SkipEmpty());
    double quota = 0, period = 0;
    if (parts.size() == 2 && absl::SimpleAtod(parts[0], &quota) &&
        absl::SimpleAtod(parts[1], &period) && quota > 0 && period > 0) {
      return quota / period;
    }
    return 0;
  }
  double quota = 0, period = 0;
  if (absl::SimpleAtod(absl::StripAsciiWhitespace(ReadFile(dir + "/cpu.cfs_quota_us")), &quota) &&
      absl::SimpleAtod(absl::StripAsciiWhitespace(ReadFile(dir + "/cpu.cfs_period_us")), &period) &&
      quota > 0 && period > 0) {
    return quota / period;
  }
  return 0;
}

// The least quota over `path` and its ancestors under `base`.
double LeastQuotaUp(const std::string& base, absl::string_view path) {
  double least = 0;
  std::string p(absl::StripSuffix(path, "/"));
  while (true) {
    const double q = QuotaIn(base + p);
    if (q > 0 && (least == 0 || q < least)) least = q;
    if (p.empty()) break;
    const size_t slash = p.rfind('/');
    p = slash == std::string::npos ? "" : p.substr(0, slash);
  }
  return least;
}

// The cgroup path /proc/self/cgroup gives for the CPU controller: v2's
// "0::PATH", or a v1 line whose controllers include "cpu"; `v1` says which.
bool CpuCgroupPath(absl::string_view proc_cgroup, std::string* path, bool* v1) {
  bool found = false;
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      if (!found) {
        *path = std::string(f[2]);
        *v1 = false;
        found = true;
      }
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == "cpu") {
        *path = std::string(f[2]);
        *v1 = true;
        return true;  // the v1 cpu controller, where mounted, sets the quota
      }
    }
  }
  return found;
}

}  // namespace

double CgroupCpuQuota(absl::string_view proc_cgroup, const std::string& root) {
  std::string path;
  bool v1 = false;
  if (!CpuCgroupPath(proc_cgroup, &path, &v1)) return 0;
  if (!v1) return LeastQuotaUp(root, path);
  // v1 mounts the controller at cpu, or at cpu,cpuacct with cpu a link.
  for (const char* mount : {"/cpu", "/cpu,cpuacct"}) {
    const double q = LeastQuotaUp(root + mount, path);
    if (q > 0) return q;
  }
  return 0;
}

RankCores ThisRankCores() {
  RankCores r;
  std::string boot = ReadFile("/proc/sys/kernel/random/boot_id");
  if (boot.empty()) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    boot = absl::StrCat("host:", name);
  }
  // Checksum64 (XXH3): the same on every process and build (absl::Hash
  // is salted per process), which is all a host's key needs.
  boot = std::string(absl::StripAsciiWhitespace(boot));
  r.host = Checksum64(boot);
  // The cgroup that holds the CPU quota: ranks in one share it, whatever
  // other (v1) controllers' groups they are in.
  const std::string proc_cgroup = ReadFile("/proc/self/cgroup");
  std::string path;
  bool v1 = false;
  if (CpuCgroupPath(proc_cgroup, &path, &v1)) {
    r.cgroup = Checksum64(absl::StrCat(boot, v1 ? "\nv1:" : "\nv2:", path));
  }
  r.quota = CgroupCpuQuota(proc_cgroup, "/sys/fs/cgroup");
  cpu_set_t set;
  CPU_ZERO(&set);
  int counted = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < RankCores::kMaxCpus && c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) {
        r.cpus[c / 64] |= uint64_t{1} << (c % 64);
        ++counted;
      }
    }
  }
  if (counted == 0) {
    const int n =
        std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, RankCores::kMaxCpus);
    for (int c = 0; c < n; ++c) r.cpus[c / 64] |= uint64_t{1} << (c % 64);
  }
  return r;
}

void EncodeRankCores(const RankCores& cores, uint8_t* out) {
  EncodeFixed64(out, cores.host);
  EncodeFixed64(out + 8, cores.cgroup);
  uint64_t quota_bits;
  std::memcpy(&quota_bits, &cores.quota, sizeof quota_bits);
  EncodeFixed64(out + 16, quota_bits);
  for (size_t w = 0; w < cores.cpus.size(); ++w) EncodeFixed64(out + 24 + 8 * w, cores.cpus[w]);
}

absl::StatusOr<RankCores> DecodeRankCores(absl::Span<const uint8_t> bytes) {
  if (bytes.size() != kRankCoresBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rank's cores take ", kRankCoresBytes, " bytes, got ", bytes.size()));
  }
  RankCores r;
  r.host = DecodeFixed64(bytes.data());
  r.cgroup = DecodeFixed64(bytes.data() + 8);
  const uint64_t quota_bits = DecodeFixed64(bytes.data() + 16);
  std::memcpy(&r.quota, &quota_bits, sizeof quota_bits);
  if (!(r.quota >= 0) || !std::isfinite(r.quota)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a rank's CPU quota must be finite and >= 0, got ", r.quota));
  }
  for (size_t w = 0; w < r.cpus.size(); ++w) r.cpus[w] = DecodeFixed64(bytes.data() + 24 + 8 * w);
  return r;
}

double CoresPerRank(absl::Span<const RankCores> ranks, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= ranks.size()) return 1;
  const uint64_t host = ranks[rank].host;
  std::array<uint64_t, RankCores::kMaxCpus / 64> cpus{};
  std::vector<std::pair<uint64_t, double>> cgroups;  // distinct, with their quotas
  int on_host = 0, empty = 0;
  bool unlimited = false;
  for (const RankCores& r : ranks) {
    if (r.host != host) continue;
    ++on_host;
    bool any = false;
    for (size_t w = 0; w < cpus.size(); ++w) {
      cpus[w] |= r.cpus[w];
      any |= r.cpus[w] != 0;
    }
    empty += !any;
    const bool seen = std::any_of(cgroups.begin(), cgroups.end(),
                                  [&](const auto& c) { return c.first == r.cgroup; });
    if (!seen) {
      cgroups.emplace_back(r.cgroup, r.quota);
      unlimited |= r.quota <= 0;
    }
  }
  double cores = empty;
  for (uint64_t w : cpus) cores += __builtin_popcountll(w);
  if (!unlimited) {
    double quotas = 0;
    for (const auto& c : cgroups) quotas += c.second;
    cores = std::min(cores, quotas);
  }
  return cores / on_host;
}

absl::StatusOr<double> MeasureCoresPerRank(transport::GlooGroup& group) {
  const int p = group.size();
  std::vector<uint8_t> mine(kRankCoresBytes), scratch;
  EncodeRankCores(ThisRankCores(), mine.data());
  std::vector<uint64_t> caps(p, kRankCoresBytes);
  std::vector<absl::Span<const uint8_t>> got(p, mine);
  if (p > 1) {
    GRADWIRE_RETURN_IF_ERROR(transport::SparseCollectives::AllgathervBounded(
        group, mine, caps, kRankCoresBytes * p, &scratch, absl::MakeSpan(got)));
  }
  std::vector<RankCores> ranks;
  for (int r = 0; r < p; ++r) {
    absl::StatusOr<RankCores> cores = DecodeRankCores(got[r]);
    if (!cores.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, "'s cores: ", cores.status().message()));
    }
    ranks.push_back(*cores);
  }
  return CoresPerRank(ranks, group.rank());
}

}  // namespace gradwire
