#include "gradwire/lib/cache/memory_tier.h"

#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace gradwire {
namespace cache {

MemoryTier::MemoryTier(Options options) : options_(std::move(options)) {
  int n = options_.shards > 0 ? options_.shards : 1;
  for (int i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>());
}

uint64_t MemoryTier::Charge(absl::string_view key, const Blob& value) {
  return value->size() + key.size() + 64;
}

MemoryTier::Shard& MemoryTier::ShardFor(absl::string_view key) {
  return *shards_[absl::Hash<absl::string_view>()(key) % shards_.size()];
}

bool MemoryTier::ReserveFillOnce(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > options_.budget_bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

absl::StatusOr<Blob> MemoryTier::Lookup(absl::string_view key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(std::string(key));
  if (it == shard.map.end()) return absl::NotFoundError("memory tier miss");
  if (options_.policy == EvictionPolicy::kLru) {
    shard.lru.splice(shard.lru.begin(), shard.lru, it->second.lru);
  }
  return it->second.value;
}

bool MemoryTier::Contains(absl::string_view key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  return shard.map.count(std::string(key)) > 0;
}

absl::Status MemoryTier::Insert(absl::string_view key, const Blob& value) {
  if (value == nullptr) return absl::InvalidArgumentError("memory tier: null value");
  const uint64_t charge = Charge(key, value);
  const uint64_t limit = options_.policy == EvictionPolicy::kLru
                             ? options_.budget_bytes / shards_.size()
                             : options_.budget_bytes;
  if (charge > limit) {
    return absl::OutOfRangeError(absl::StrCat("memory tier: '", key, "' needs ", charge,
                                              " bytes, more than the tier's budget (", limit,
                                              " bytes per shard)"));
  }
  Shard& shard = ShardFor(key);
  std::vector<std::pair<std::string, Blob>> evicted;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    std::string k(key);
    if (shard.map.count(k) > 0) return absl::OkStatus();  // immutable data: same bytes
    if (options_.policy == EvictionPolicy::kFillOnce) {
      if (!ReserveFillOnce(charge)) {
        return absl::ResourceExhaustedError("memory tier full (fill-once admits no more)");
      }
    } else {
      while (shard.bytes + charge > limit && !shard.lru.empty()) {
        auto victim = shard.map.find(shard.lru.back());
        uint64_t victim_charge = Charge(victim->first, victim->second.value);
        shard.bytes -= victim_charge;
        used_.fetch_sub(victim_charge, std::memory_order_relaxed);
        entries_.fetch_sub(1, std::memory_order_relaxed);
        evicted.emplace_back(victim->first, std::move(victim->second.value));
        shard.map.erase(victim);
        shard.lru.pop_back();
      }
      used_.fetch_add(charge, std::memory_order_relaxed);
    }
    Entry entry;
    entry.value = value;
    if (options_.policy == EvictionPolicy::kLru) {
      shard.lru.push_front(k);
      entry.lru = shard.lru.begin();
    }
    shard.map.emplace(std::move(k), std::move(entry));
    shard.bytes += charge;
    entries_.fetch_add(1, std::memory_order_relaxed);
  }
  if (options_.on_evict) {
    for (const auto& [k, v] : evicted) options_.on_evict(k, v);
  }
  return absl::OkStatus();
}

}  // namespace cache
}  // namespace gradwire
