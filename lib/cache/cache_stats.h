// Per-epoch statistics of a DataCache, per tier: what a user watching a
// training job needs to know whether the cache is doing its work.
#ifndef GRADWIRE_LIB_CACHE_CACHE_STATS_H_
#define GRADWIRE_LIB_CACHE_CACHE_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gradwire {
namespace cache {

struct TierStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t hit_bytes = 0;
  uint64_t inserts = 0;           // entries admitted this epoch
  uint64_t rejected_full = 0;     // inserts refused for lack of room
  uint64_t rejected_too_big = 0;  // objects larger than the whole budget
  uint64_t write_errors = 0;      // other failed inserts (I/O errors, disk full)
  uint64_t write_dropped = 0;     // async disk writes dropped: queue full
  uint64_t corrupt = 0;           // damaged entries found (quarantined, refetched)
  uint64_t used_bytes = 0;        // at the end of the epoch (or now)
  uint64_t budget_bytes = 0;
  // Seconds from the cache's creation until the tier was warm: the first
  // insert it refused for lack of room, or else its latest admission.
  // Negative if it holds nothing yet.
  double warm_seconds = -1;

  double hit_rate() const { return hits + misses == 0 ? 0.0 : double(hits) / (hits + misses); }
};

struct EpochStats {
  int epoch = 0;
  uint64_t reads = 0;  // objects returned to the reader
  uint64_t read_bytes = 0;
  TierStats memory;
  TierStats disk;
  uint64_t remote_reads = 0;
  uint64_t remote_bytes = 0;
  uint64_t remote_errors = 0;
  double stall_seconds = 0;  // time the reader waited for data
  double wall_seconds = 0;   // BeginEpoch to EndEpoch (or now)

  // Reads served by any cache tier.
  double cache_hit_rate() const {
    return reads == 0 ? 0.0 : double(memory.hits + disk.hits) / reads;
  }
  double samples_per_second() const { return wall_seconds > 0 ? reads / wall_seconds : 0.0; }
};

// One line per epoch with a header line: fixed-width, for logs.
std::string FormatEpochStats(const std::vector<EpochStats>& epochs);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_CACHE_STATS_H_
