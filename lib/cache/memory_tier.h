// MemoryTier: host-memory level of the data cache.
//
// Keys hash to one of `shards` independently locked maps, so concurrent
// readers on different keys rarely contend. Values are shared, immutable
// Blobs: a reader keeps its bytes even if the entry is evicted meanwhile.
//
// Budget: fill-once admission is decided against one global byte counter
// (so the cached fraction is exact); LRU evicts within a shard, each shard
// owning budget/shards bytes (use shards = 1 for a single global LRU).
//
// An evicted entry is handed to `on_evict` (outside any lock) so the owner
// can demote it to the next tier instead of dropping the only local copy.
#ifndef GRADWIRE_LIB_CACHE_MEMORY_TIER_H_
#define GRADWIRE_LIB_CACHE_MEMORY_TIER_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gradwire/lib/cache/cache_tier.h"

namespace gradwire {
namespace cache {

class MemoryTier : public CacheTier {
 public:
  struct Options {
    uint64_t budget_bytes = 0;
    EvictionPolicy policy = EvictionPolicy::kFillOnce;
    int shards = 16;
    std::function<void(const std::string& key, const Blob& value)> on_evict;
  };

  explicit MemoryTier(Options options);

  absl::string_view name() const override { return "memory"; }
  absl::StatusOr<Blob> Lookup(absl::string_view key) override;
  absl::Status Insert(absl::string_view key, const Blob& value) override;
  bool Contains(absl::string_view key) override;
  uint64_t used_bytes() const override { return used_.load(std::memory_order_relaxed); }
  uint64_t budget_bytes() const override { return options_.budget_bytes; }
  uint64_t entry_count() const override { return entries_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    Blob value;
    std::list<std::string>::iterator lru;  // position in Shard::lru (LRU only)
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry> map;
    std::list<std::string> lru;  // front = most recently used
    uint64_t bytes = 0;
  };

  // Bytes an entry is charged: its value plus its key and bookkeeping, so
  // a budget of many tiny entries is not overrun by overhead.
  static uint64_t Charge(absl::string_view key, const Blob& value);
  Shard& ShardFor(absl::string_view key);
  bool ReserveFillOnce(uint64_t bytes);

  const Options options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> entries_{0};
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_MEMORY_TIER_H_
