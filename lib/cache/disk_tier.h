// DiskTier: local-disk level of the data cache, one file per entry.
//
// Entry file "<32 hex>.gwc", named by a hash of (dataset version, key), in
// the format of disk_entry.h (header, key, value; checksummed). Every
// lookup verifies the header, the key, the version and the value checksum,
// reading the header before any value byte, so a torn, flipped or stale
// entry is never served: a damaged one is moved to quarantine/ (kept for
// inspection until the next Open), reported as DataLoss, and the cache
// refetches it from the next level. A valid entry of another key found
// under this key's name is moved to its own name (or dropped if that name
// is taken) and the lookup is a miss, so the next fill repairs the slot.
//
// Publishing follows atomic_file.h: uniquely named temp file (held under an
// OFD lock while written) -> fdatasync -> rename -> fsync of the directory.
// Readers see the old entry or the new one, never a torn one.
//
// Open() rebuilds the index from the directory: abandoned temp files (their
// writer's lock is gone, i.e. it died) are deleted, entries failing their
// checksum are quarantined, entries of other dataset versions are deleted,
// misplaced entries are moved to their own names, and files larger than the
// whole budget are deleted unread.
//
// Several processes (one per GPU) may share a directory (see
// shared_directory.h): no lock files exist, the only locks are OFD locks
// that die with their process, publishes never replace an entry (a second
// writer of the same key drops its copy), and a lookup that misses this
// process's index probes the directory, so entries published by others are
// found. The budget is theirs together: every write reserves its bytes in
// the directory's ledger first, so the directory never holds more than
// budget_bytes, however many processes write. Fetch claims (TryClaim) let
// the cache fetch each missing entry in one process while the others wait
// for it (data_cache.h).
#ifndef GRADWIRE_LIB_CACHE_DISK_TIER_H_
#define GRADWIRE_LIB_CACHE_DISK_TIER_H_

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/cache_tier.h"
#include "gradwire/lib/cache/shared_directory.h"

namespace gradwire {
namespace cache {

struct EntryHeader;  // disk_entry.h

class DiskTier : public CacheTier {
 public:
  struct Options {
    std::string dir;
    uint64_t budget_bytes = 0;  // file bytes (headers included)
    EvictionPolicy policy = EvictionPolicy::kFillOnce;
    uint64_t dataset_version = 0;  // Manifest::version(): the only version served
    // Read and checksum every entry at Open (else headers only; values are
    // still verified on every lookup).
    bool verify_on_open = true;
    // fdatasync + directory fsync per publish. Turning it off keeps
    // atomicity (rename) but not durability across power loss.
    bool sync = true;
  };

  // What Open found and did.
  struct OpenReport {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t temp_files_removed = 0;
    uint64_t corrupt_quarantined = 0;
    uint64_t stale_removed = 0;  // other dataset versions
    uint64_t over_budget_removed = 0;
    uint64_t misplaced_repaired = 0;  // valid entries found under another key's name
  };

  // Creates options.dir if missing. A directory that holds anything but
  // the cache's own files (entries, temp files, quarantine/, the shared
  // ledger) is refused (FailedPrecondition naming one): the tier removes
  // files by name there. So are a symbolic link in place of the ledger and
  // a path holding a NUL.
  static absl::StatusOr<std::unique_ptr<DiskTier>> Open(Options options);

  absl::string_view name() const override { return "disk"; }
  absl::StatusOr<Blob> Lookup(absl::string_view key) override;
  absl::Status Insert(absl::string_view key, const Blob& value) override;
  bool Contains(absl::string_view key) override;
  // Bytes of the budget in use in the directory, by every process sharing
  // it (entries and writes in progress).
  uint64_t used_bytes() const override;
  uint64_t budget_bytes() const override { return options_.budget_bytes; }
  uint64_t entry_count() const override;

  // Inserts several entries with one syncfs and one directory fsync for
  // all of them (group commit); one status per entry, as Insert returns.
  std::vector<absl::Status> InsertBatch(const std::vector<std::pair<std::string, Blob>>& entries);

  // Fetch claims (shared_directory.h): kClaimed if this process (and
  // thread) now holds `key`'s claim, to release once the entry is
  // published or will not be. Claims die with their process.
  SharedDirectory::Claim TryClaim(absl::string_view key);
  void ReleaseClaim(absl::string_view key);
  // True for a fill-once tier too full for any entry of the smallest size
  // seen: claiming entries it will not admit would only make readers wait.
  bool Full() const;

  const OpenReport& open_report() const { return report_; }
  uint64_t quarantined() const { return quarantined_.load(std::memory_order_relaxed); }
  const std::string& dir() const { return options_.dir; }

  // The file that holds `key` for dataset `version` (for tests and tools).
  static std::string EntryFileName(uint64_t version, absl::string_view key);
  // Bytes a value of `value_bytes` under `key` occupies on disk.
  static uint64_t EntryBytes(absl::string_view key, uint64_t value_bytes);

 private:
  struct IndexEntry {
    uint64_t bytes = 0;
    std::list<std::string>::iterator lru;
  };

  explicit DiskTier(Options options);
  absl::Status Load();
  // Moves dir/file (`bytes` long) to quarantine/.
  absl::Status Quarantine(const std::string& file, uint64_t bytes);
  // Moves a valid entry found under the wrong name `file` (`bytes` long)
  // to its own name (dropping it if that is taken or it is stale); true if
  // it was moved.
  bool Rehome(const std::string& file, const EntryHeader& entry, uint64_t bytes);
  // Reserves room for `bytes` in the shared ledger (evicting this
  // process's least recent entries under LRU).
  absl::Status Reserve(const std::string& key, uint64_t bytes, bool* already_present);
  // Removes dir/file if present; its bytes leave the ledger. False if it
  // was already gone.
  bool RemoveFile(const std::string& file, uint64_t bytes);
  // A write in progress: room reserved, temp file written, not yet synced
  // or published.
  struct PendingWrite {
    std::string key;
    uint64_t bytes = 0;
    bool present = false;  // already indexed (or released): nothing to do
    std::optional<TempFile> temp;
  };
  absl::Status StartWrite(const std::string& key, const Blob& value, PendingWrite* w);
  // Publishes (if `status` is OK) and releases the reservation.
  absl::Status FinishWrite(PendingWrite* w, absl::Status status);
  void AddToIndexLocked(const std::string& key, uint64_t bytes);
  void RemoveFromIndex(const std::string& key);

  const Options options_;
  OpenReport report_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, IndexEntry> index_;
  std::list<std::string> lru_;  // front = most recent; every indexed key
  uint64_t used_ = 0;           // bytes of indexed entries
  std::unique_ptr<SharedDirectory> shared_;
  std::atomic<uint64_t> smallest_entry_{UINT64_MAX};  // bytes of the smallest entry seen
  std::atomic<uint64_t> quarantined_{0};
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DISK_TIER_H_
