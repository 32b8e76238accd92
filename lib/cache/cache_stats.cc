#include "gradwire/lib/cache/cache_stats.h"

#include "absl/strings/str_format.h"

namespace gradwire {
namespace cache {

std::string FormatEpochStats(const std::vector<EpochStats>& epochs) {
  std::string out =
      absl::StrFormat("%5s %9s %10s %8s %8s %8s %11s %8s %8s %9s %9s %7s\n", "epoch", "reads",
                      "samples/s", "mem_hit", "disk_hit", "all_hit", "remote_MB", "stall_s",
                      "wall_s", "mem_warm", "disk_warm", "corrupt");
  for (const EpochStats& e : epochs) {
    absl::StrAppendFormat(
        &out, "%5d %9d %10.0f %7.2f%% %7.2f%% %7.2f%% %11.2f %8.3f %8.3f %9.3f %9.3f %7d\n",
        e.epoch, e.reads, e.samples_per_second(), 100 * e.memory.hit_rate(),
        100 * e.disk.hit_rate(), 100 * e.cache_hit_rate(), e.remote_bytes / 1e6, e.stall_seconds,
        e.wall_seconds, e.memory.warm_seconds, e.disk.warm_seconds,
        e.memory.corrupt + e.disk.corrupt);
  }
  return out;
}

}  // namespace cache
}  // namespace gradwire
