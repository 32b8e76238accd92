// Prefetcher: reads one rank's epoch ahead of the trainer, in the order the
// trainer will ask for it (epoch_order.h), so remote latency is hidden.
//
// A fixed pool of threads claims batches of upcoming keys and fetches them
// through the DataCache (hits come from memory or disk, misses from the
// source in one round trip per batch). At most `depth` objects are fetched
// or waiting ahead of the reader, which bounds memory.
//
// Depth is what keeps the link busy: objects in flight must cover one
// round trip at full bandwidth, depth = latency x bandwidth / object size.
// Set it, or leave it 0 and the prefetcher computes it from the smallest
// round trip it has measured, the bandwidth (configured, or measured) and
// the mean object size, times a headroom factor (default 4).
//
// Every wait is bounded: Next() gives up after item_timeout, workers
// re-check for shutdown at least every 100 ms, and the destructor joins
// them after their current fetch (itself bounded by the source's deadlines).
#ifndef GRADWIRE_LIB_CACHE_PREFETCHER_H_
#define GRADWIRE_LIB_CACHE_PREFETCHER_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/lib/cache/data_cache.h"

namespace gradwire {
namespace cache {

class Prefetcher {
 public:
  struct Options {
    size_t depth = 0;  // objects ahead of the reader; 0 = from measurements
    int threads = 8;
    size_t max_batch = 512;  // keys per fetch
    // Fewest keys per fetch (unless the window is smaller): fetches that
    // hit memory cost mostly their hand-off, so they should not be tiny.
    size_t min_batch = 32;
    absl::Duration item_timeout = absl::Seconds(60);
    double bandwidth_bytes_per_second = 0;  // for depth = 0; 0 = measured
    // Automatic depth = headroom x latency x bandwidth / object size: 1 would
    // cover one round trip exactly, with nothing for a batch still being
    // transferred or a scheduler delay on a busy host.
    double headroom = 4;
    size_t min_depth = 256;
    size_t max_depth = 1 << 16;
  };

  // depth = ceil(latency x bandwidth / item_bytes), clamped to [lo, hi].
  static size_t DepthFor(absl::Duration latency, double bytes_per_second, double item_bytes,
                         size_t lo, size_t hi);

  // This rank's epoch, EpochOrder(keys, seed, epoch, rank, world), prefetched.
  static absl::StatusOr<std::unique_ptr<Prefetcher>> ForEpoch(DataCache* cache,
                                                              const std::vector<std::string>& keys,
                                                              uint64_t seed, uint64_t epoch,
                                                              int rank, int world,
                                                              const Options& options);

  // Starts fetching `order` through `cache` (which must outlive this).
  Prefetcher(DataCache* cache, std::vector<std::string> order, const Options& options);
  ~Prefetcher();

  // The next object in order (call from one reader thread). OutOfRange
  // after the last one;
  // DeadlineExceeded if it has not arrived within item_timeout; otherwise
  // the fetch's own result (e.g. Unavailable while the server is down: the
  // reader may retry that key with DataCache::Get).
  absl::StatusOr<Blob> Next();

  // Stops the workers (no new fetches) and joins them. Idempotent.
  void Shutdown();

  size_t depth() const;
  size_t size() const { return order_.size(); }

 private:
  void WorkerLoop();
  size_t BatchLocked() const;  // keys the next claim takes
  void UpdateDepthLocked(absl::Duration latency, size_t from_source, uint64_t bytes, size_t items);

  DataCache* const cache_;
  const std::vector<std::string> order_;
  const Options options_;
  const absl::Time start_;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;  // a slot was filled, or stopping
  std::condition_variable room_cv_;   // the reader advanced, or stopping
  std::vector<std::optional<absl::StatusOr<Blob>>> slots_;
  size_t next_ = 0;   // next position Next() returns
  size_t claim_ = 0;  // next position a worker fetches
  size_t depth_;
  bool stopping_ = false;
  bool reader_waiting_ = false;
  // Measurements for the automatic depth.
  absl::Duration min_latency_ = absl::InfiniteDuration();
  uint64_t fetched_bytes_ = 0;
  uint64_t fetched_items_ = 0;

  // Objects the reader already took out of slots_ (reader thread only):
  // one lock per run of ready objects instead of one per object.
  std::deque<absl::StatusOr<Blob>> taken_;

  std::vector<std::thread> workers_;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_PREFETCHER_H_
