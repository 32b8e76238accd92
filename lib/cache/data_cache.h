// DataCache: memory -> local disk -> source, behind one Get.
//
// A read looks in the memory tier, then the disk tier, then asks the
// source (a RemoteTier or DirectorySource) and fills the tiers on the way
// back: memory synchronously, disk (by default only what memory could not
// take) through a bounded background writer so fsync latency never stalls
// the reader. A damaged disk entry is counted,
// quarantined by the tier and refetched; a full or failing tier is counted
// and skipped. The reader always gets the source's bytes or a clear error.
//
// Version pinning: the disk tier is opened for the source's manifest
// version, so entries of any other dataset version are never served (and
// are removed when the tier opens).
//
// Never the only copy: the source holds everything, and an entry the
// memory tier evicts (LRU) is written to the disk tier if that lacks it.
//
// Several processes sharing one disk directory (one per GPU) fetch each
// missing entry once: a reader claims a miss before asking the source
// (DiskTier::TryClaim, a lock that dies with its process) and holds the
// claim until the entry is on disk; a reader that finds it claimed waits
// (at most claim_wait) and reads it from disk instead. Entries reach the
// disk when memory does not keep them or disk_includes_memory is set: with
// a memory tier that keeps entries and no disk copy, each process fetches
// its own. A full fill-once disk tier takes no claims (nothing more will be
// written to share).
//
// Statistics are kept per epoch (BeginEpoch) and per tier; Stats() returns
// them and FormatStats() prints them.
#ifndef GRADWIRE_LIB_CACHE_DATA_CACHE_H_
#define GRADWIRE_LIB_CACHE_DATA_CACHE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/lib/cache/cache_stats.h"
#include "gradwire/lib/cache/data_source.h"
#include "gradwire/lib/cache/disk_tier.h"
#include "gradwire/lib/cache/memory_tier.h"

namespace gradwire {
namespace cache {

class DataCache {
 public:
  struct Options {
    uint64_t memory_budget_bytes = 0;  // 0: no memory tier
    EvictionPolicy memory_policy = EvictionPolicy::kFillOnce;
    int memory_shards = 16;
    std::string disk_dir;  // empty: no disk tier
    uint64_t disk_budget_bytes = 0;
    EvictionPolicy disk_policy = EvictionPolicy::kFillOnce;
    bool disk_sync = true;  // see DiskTier::Options::sync
    bool disk_verify_on_open = true;
    // Disk fills go through a background writer; when this many bytes are
    // waiting, new ones are dropped (counted) rather than queued without
    // bound. 0 writes synchronously in the reader's thread.
    size_t disk_write_queue_bytes = 64 << 20;
    // false (default): the disk holds what memory could not (rejected or
    // evicted), so the two budgets add up. true: the disk also keeps a
    // copy of what memory holds, which survives a restart of the process.
    bool disk_includes_memory = false;
    // How long a reader waits for an entry another process sharing the
    // disk directory is fetching, before fetching it itself.
    absl::Duration claim_wait = absl::Seconds(60);
  };

  static absl::StatusOr<std::unique_ptr<DataCache>> Create(std::shared_ptr<DataSource> source,
                                                           const Options& options);
  ~DataCache();  // stops the disk writer; unwritten fills are dropped

  // One object for a reader; the time spent counts as stall time.
  absl::StatusOr<Blob> Get(absl::string_view key);

  // Many objects, one result each, misses fetched from the source in one
  // batch. Used by the Prefetcher: counts reads, not stall time. If
  // `from_source` is given it receives how many keys went to the source.
  std::vector<absl::StatusOr<Blob>> Fetch(absl::Span<const std::string> keys,
                                          size_t* from_source = nullptr);

  // Starts a new statistics epoch (and ends the previous one).
  void BeginEpoch(int epoch);
  void EndEpoch();
  // Time a reader waited for data outside Get (the Prefetcher reports it).
  void AddStall(absl::Duration stall);

  std::vector<EpochStats> Stats() const;
  std::string FormatStats() const { return FormatEpochStats(Stats()); }

  // Waits until queued disk writes are done, at most `timeout`.
  absl::Status FlushDiskWrites(absl::Duration timeout);

  const Manifest& manifest() const { return source_->manifest(); }
  MemoryTier* memory() { return memory_.get(); }
  DiskTier* disk() { return disk_.get(); }
  DataSource* source() { return source_.get(); }

 private:
  struct TierCounters {
    std::atomic<uint64_t> hits{0}, misses{0}, hit_bytes{0}, inserts{0}, rejected_full{0},
        rejected_too_big{0}, write_errors{0}, write_dropped{0}, corrupt{0};
  };
  struct Counters {
    int epoch = 0;
    absl::Time begin, end;
    bool ended = false;
    std::atomic<uint64_t> reads{0}, read_bytes{0}, remote_reads{0}, remote_bytes{0},
        remote_errors{0}, stall_ns{0};
    TierCounters memory, disk;
  };
  // When a tier last admitted an entry / first refused one for room.
  struct Warmth {
    std::atomic<int64_t> last_insert_ns{-1};
    std::atomic<int64_t> first_full_ns{-1};
  };

  DataCache(std::shared_ptr<DataSource> source, const Options& options);
  Counters* current();
  void CountInsert(const absl::Status& s, TierCounters* counters, Warmth* warmth);
  // True if memory took the entry.
  bool InsertMemory(const std::string& key, const Blob& value);
  // A disk fill; `claimed`: this process holds the key's fetch claim,
  // released once the fill is written or dropped.
  struct DiskFill {
    std::string key;
    Blob value;
    bool claimed = false;
  };
  void InsertDisk(std::string key, Blob value);
  // Queues many disk fills under one lock and one wake-up.
  void InsertDiskMany(std::vector<DiskFill> entries);
  void ReleaseClaims(const std::vector<DiskFill>& fills);
  // Misses of Fetch: keys[j] goes to (*out)[at[j]]. Returns how many went
  // to the source.
  size_t FetchMissing(const std::vector<std::string>& keys, const std::vector<size_t>& at,
                      std::vector<absl::StatusOr<Blob>>* out, Counters* c);
  // Asks the source for keys[j], j in `which`, fills the tiers.
  void FetchFromSource(const std::vector<std::string>& keys, const std::vector<size_t>& at,
                       const std::vector<size_t>& which, bool claimed,
                       std::vector<absl::StatusOr<Blob>>* out, Counters* c);
  void DiskWriterLoop();
  TierStats Snapshot(const TierCounters& c, const Warmth& w, const CacheTier* tier) const;

  const std::shared_ptr<DataSource> source_;
  const Options options_;
  const absl::Time created_;
  std::unique_ptr<MemoryTier> memory_;
  std::unique_ptr<DiskTier> disk_;
  Warmth memory_warmth_, disk_warmth_;

  mutable std::mutex stats_mu_;
  std::map<int, std::unique_ptr<Counters>> epochs_;
  std::atomic<Counters*> current_{nullptr};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;    // work arrived, or stopping
  std::condition_variable drained_cv_;  // queue empty and writer idle
  std::deque<DiskFill> queue_;
  size_t queued_bytes_ = 0;
  bool writer_busy_ = false;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DATA_CACHE_H_
