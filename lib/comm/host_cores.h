// How much of a core each rank's CPU work gets when ranks share a machine:
// the exchange cost model's cores_per_rank (exchange_cost_model.h), as
// AgreeExchangeModel measures it.
//
// Every rank describes itself (RankCores: its kernel instance, its
// cgroup, the CPUs it may run on, its cgroup's CPU quota); the ranks
// allgather the descriptions; each host's ranks then split what they have
// between them:
//
//   cores_per_rank = min(|union of their CPU sets|, sum of their distinct
//                        cgroups' quotas) / ranks on the host
//
// Four ranks on a 2-core machine get 0.5; eight ranks pinned one to a core
// get 1 each; four containers of one rank and one core each on a 64-core
// machine get 1 each; four ranks in one container limited to 2 cores get
// 0.5. "A host" is a running kernel (/proc/sys/kernel/random/boot_id):
// containers and network namespaces on one machine share their cores and
// are one host; so are the emulated hosts of tools/emulated_cluster.py.
#ifndef GRADWIRE_LIB_COMM_HOST_CORES_H_
#define GRADWIRE_LIB_COMM_HOST_CORES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

struct RankCores {
  static constexpr int kMaxCpus = 1024;        // CPUs past this are not seen
  uint64_t host = 0;                           // the kernel instance, hashed
  uint64_t cgroup = 0;                         // host and CPU cgroup path, hashed
  double quota = 0;                            // cores the cgroup may use; 0: no limit
  std::array<uint64_t, kMaxCpus / 64> cpus{};  // bit c: may run on CPU c
};

// Fixed size of RankCores on the wire (little-endian fields in order).
inline constexpr size_t kRankCoresBytes = 8 + 8 + 8 + RankCores::kMaxCpus / 8;

// This process's description, read from /proc and /sys: boot_id (the host
// name where it cannot be read), /proc/self/cgroup, the CPU quota of its
// cgroup and its ancestors (the least; cgroup v2's cpu.max, v1's
// cpu.cfs_quota_us / cpu.cfs_period_us) and sched_getaffinity (every CPU
// std::thread::hardware_concurrency counts where it fails).
RankCores ThisRankCores();

// The CPU quota, in cores, that the cgroup file system under `root`
// (normally /sys/fs/cgroup) sets for the process whose /proc/PID/cgroup
// reads `proc_cgroup`: the least over its cgroup and their ancestors; 0
// where none sets one or nothing can be read.
double CgroupCpuQuota(absl::string_view proc_cgroup, const std::string& root);

void EncodeRankCores(const RankCores& cores, uint8_t* out);  // kRankCoresBytes
// InvalidArgument for a size other than kRankCoresBytes or a quota that is
// negative or not finite (a peer's bytes).
absl::StatusOr<RankCores> DecodeRankCores(absl::Span<const uint8_t> bytes);

// The cores each rank on `ranks[rank]`'s host gets (the rule above; a
// rank with an empty CPU set counts one CPU). At most the host's CPUs
// over its ranks; may exceed 1.
double CoresPerRank(absl::Span<const RankCores> ranks, int rank);

// Collective: every rank of `group` describes itself (ThisRankCores), the
// ranks allgather the descriptions and each returns CoresPerRank for its
// own host. InvalidArgument naming the rank whose bytes do not decode.
absl::StatusOr<double> MeasureCoresPerRank(transport::GlooGroup& group);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_HOST_CORES_H_
