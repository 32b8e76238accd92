// CacheTier: one level of the data cache (memory_tier.h, disk_tier.h).
//
// A tier holds copies of a dataset's objects under a byte budget. It never
// holds the only copy of anything: the DataSource behind the cache always
// has the object, so a tier may refuse, drop or quarantine an entry and the
// cache falls back to the next level. Errors are reported, never hidden:
//   Lookup: NotFound (miss), DataLoss (the copy was damaged; the tier has
//           already quarantined it, so the next lookup is a plain miss).
//   Insert: ResourceExhausted (no room: full under fill-once, or the disk
//           is full), OutOfRange (the object alone exceeds the budget).
#ifndef GRADWIRE_LIB_CACHE_CACHE_TIER_H_
#define GRADWIRE_LIB_CACHE_CACHE_TIER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gradwire/lib/cache/data_source.h"

namespace gradwire {
namespace cache {

// Which entries a full tier gives up.
enum class EvictionPolicy {
  // Admit until the budget is reached, then admit nothing and evict
  // nothing. Under shuffled epochs every epoch reads every object once in
  // random order, so a fixed subset of fraction f serves exactly f of the
  // reads from epoch 2 on: the best any policy can do without knowing the
  // future.
  kFillOnce,
  // Least recently used, for comparison: under shuffled epochs the entry
  // evicted is about as likely to be read next as any other, so LRU hits
  // markedly less than the cached fraction.
  kLru,
};

absl::string_view EvictionPolicyName(EvictionPolicy policy);  // "fill_once", "lru"
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name);

class CacheTier {
 public:
  virtual ~CacheTier() = default;

  virtual absl::string_view name() const = 0;  // "memory", "disk"

  virtual absl::StatusOr<Blob> Lookup(absl::string_view key) = 0;
  virtual absl::Status Insert(absl::string_view key, const Blob& value) = 0;
  virtual bool Contains(absl::string_view key) = 0;

  virtual uint64_t used_bytes() const = 0;
  virtual uint64_t budget_bytes() const = 0;
  virtual uint64_t entry_count() const = 0;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_CACHE_TIER_H_
