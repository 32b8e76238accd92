#include "gradwire/lib/cache/data_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {
namespace {

// Entries per group commit: one syncfs costs about as much as a few
// hundred single-file fdatasyncs, so batches are large.
constexpr size_t kDiskBatch = 2048;

}  // namespace

DataCache::DataCache(std::shared_ptr<DataSource> source, const Options& options)
    : source_(std::move(source)), options_(options), created_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<DataCache>> DataCache::Create(std::shared_ptr<DataSource> source,
                                                             const Options& options) {
  if (source == nullptr) return absl::InvalidArgumentError("data cache: no source");
  std::unique_ptr<DataCache> cache(new DataCache(source, options));
  DataCache* self = cache.get();
  if (options.memory_budget_bytes > 0) {
    MemoryTier::Options m;
    m.budget_bytes = options.memory_budget_bytes;
    m.policy = options.memory_policy;
    m.shards = options.memory_shards;
    // Demote what memory evicts so it is not dropped from every local tier.
    m.on_evict = [self](const std::string& key, const Blob& value) {
      if (self->disk_ != nullptr && !self->disk_->Contains(key)) self->InsertDisk(key, value);
    };
    cache->memory_ = std::make_unique<MemoryTier>(std::move(m));
  }
  if (!options.disk_dir.empty()) {
    DiskTier::Options d;
    d.dir = options.disk_dir;
    d.budget_bytes = options.disk_budget_bytes;
    d.policy = options.disk_policy;
    d.dataset_version = source->manifest().version();  // the pin
    d.sync = options.disk_sync;
    d.verify_on_open = options.disk_verify_on_open;
    GRADWIRE_ASSIGN_OR_RETURN(cache->disk_, DiskTier::Open(std::move(d)));
    if (options.disk_write_queue_bytes > 0) {
      cache->writer_ = std::thread([self] { self->DiskWriterLoop(); });
    }
  }
  return cache;
}

DataCache::~DataCache() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

DataCache::Counters* DataCache::current() {
  Counters* c = current_.load(std::memory_order_acquire);
  if (c != nullptr) return c;
  BeginEpoch(0);
  return current_.load(std::memory_order_acquire);
}

void DataCache::BeginEpoch(int epoch) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  absl::Time now = absl::Now();
  if (Counters* old = current_.load()) {
    if (!old->ended) {
      old->end = now;
      old->ended = true;
    }
  }
  auto& slot = epochs_[epoch];
  if (slot == nullptr) {
    slot = std::make_unique<Counters>();
    slot->epoch = epoch;
    slot->begin = now;
  }
  current_.store(slot.get(), std::memory_order_release);
}

void DataCache::EndEpoch() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (Counters* c = current_.load()) {
    if (!c->ended) {
      c->end = absl::Now();
      c->ended = true;
    }
  }
}

void DataCache::AddStall(absl::Duration stall) {
  current()->stall_ns.fetch_add(absl::ToInt64Nanoseconds(stall), std::memory_order_relaxed);
}

void DataCache::CountInsert(const absl::Status& s, TierCounters* counters, Warmth* warmth) {
  int64_t now_ns = absl::ToInt64Nanoseconds(absl::Now() - created_);
  if (s.ok()) {
    counters->inserts.fetch_add(1, std::memory_order_relaxed);
    warmth->last_insert_ns.store(now_ns, std::memory_order_relaxed);
  } else if (absl::IsResourceExhausted(s)) {
    counters->rejected_full.fetch_add(1, std::memory_order_relaxed);
    int64_t unset = -1;
    warmth->first_full_ns.compare_exchange_strong(unset, now_ns, std::memory_order_relaxed);
  } else if (absl::IsOutOfRange(s)) {
    counters->rejected_too_big.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters->write_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

bool DataCache::InsertMemory(const std::string& key, const Blob& value) {
  if (memory_ == nullptr) return false;
  absl::Status s = memory_->Insert(key, value);
  CountInsert(s, &current()->memory, &memory_warmth_);
  return s.ok();
}

void DataCache::InsertDisk(std::string key, Blob value) {
  std::vector<DiskFill> one(1);
  one[0].key = std::move(key);
  one[0].value = std::move(value);
  InsertDiskMany(std::move(one));
}

void DataCache::ReleaseClaims(const std::vector<DiskFill>& fills) {
  for (const DiskFill& f : fills) {
    if (f.claimed) disk_->ReleaseClaim(f.key);
  }
}

void DataCache::InsertDiskMany(std::vector<DiskFill> entries) {
  if (disk_ == nullptr || entries.empty()) return;
  if (options_.disk_write_queue_bytes == 0) {
    for (const DiskFill& f : entries) {
      CountInsert(disk_->Insert(f.key, f.value), &current()->disk, &disk_warmth_);
    }
    ReleaseClaims(entries);
    return;
  }
  std::vector<DiskFill> dropped;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (DiskFill& entry : entries) {
      size_t bytes = entry.key.size() + entry.value->size();
      if (queued_bytes_ + bytes > options_.disk_write_queue_bytes) {
        dropped.push_back(std::move(entry));
      } else {
        queued_bytes_ += bytes;
        queue_.push_back(std::move(entry));
      }
    }
  }
  if (!dropped.empty()) {
    current()->disk.write_dropped.fetch_add(dropped.size(), std::memory_order_relaxed);
    ReleaseClaims(dropped);
  }
  queue_cv_.notify_one();
}

void DataCache::DiskWriterLoop() {
  // No lower priority for fills: on a busy host a niced writer is starved
  // and the disk tier never warms (measured: 2048 entries took 7 s at nice 10).
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (true) {
    // Bounded wait: re-checks stopping_ even if a notification is missed.
    queue_cv_.wait_for(lock, std::chrono::milliseconds(100),
                       [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    if (queue_.empty()) continue;
    std::vector<DiskFill> batch;
    while (!queue_.empty() && batch.size() < kDiskBatch) {
      queued_bytes_ -= queue_.front().key.size() + queue_.front().value->size();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    writer_busy_ = true;
    lock.unlock();
    // One syncfs and one directory fsync for the whole batch (group commit).
    std::vector<std::pair<std::string, Blob>> entries;
    entries.reserve(batch.size());
    for (const DiskFill& f : batch) entries.emplace_back(f.key, f.value);
    std::vector<absl::Status> results = disk_->InsertBatch(entries);
    ReleaseClaims(batch);
    for (const absl::Status& s : results) CountInsert(s, &current()->disk, &disk_warmth_);
    lock.lock();
    writer_busy_ = false;
    if (queue_.empty()) drained_cv_.notify_all();
  }
}

absl::Status DataCache::FlushDiskWrites(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  bool done = drained_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] {
    return (queue_.empty() && !writer_busy_) || stopping_;
  });
  if (!done) {
    return absl::DeadlineExceededError(absl::StrCat("data cache: ", queue_.size(),
                                                    " disk writes still queued after ",
                                                    absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Blob> DataCache::Get(absl::string_view key) {
  absl::Time start = absl::Now();
  std::string k(key);
  std::vector<absl::StatusOr<Blob>> result = Fetch(absl::MakeConstSpan(&k, 1));
  AddStall(absl::Now() - start);
  return std::move(result[0]);
}

std::vector<absl::StatusOr<Blob>> DataCache::Fetch(absl::Span<const std::string> keys,
                                                   size_t* from_source) {
  Counters* c = current();
  // Counted locally and added once per call: several prefetch threads
  // hammering shared atomics per object would cost more than a memory hit.
  uint64_t mem_hits = 0, mem_hit_bytes = 0, mem_misses = 0;
  uint64_t disk_hits = 0, disk_hit_bytes = 0, disk_misses = 0, disk_corrupt = 0;
  std::vector<absl::StatusOr<Blob>> out(keys.size(), absl::NotFoundError("not looked up"));
  std::vector<std::string> missing;
  std::vector<size_t> missing_at;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    if (memory_ != nullptr) {
      absl::StatusOr<Blob> hit = memory_->Lookup(key);
      if (hit.ok()) {
        ++mem_hits;
        mem_hit_bytes += (*hit)->size();
        out[i] = std::move(hit);
        continue;
      }
      ++mem_misses;
    }
    if (disk_ != nullptr) {
      absl::StatusOr<Blob> hit = disk_->Lookup(key);
      if (hit.ok()) {
        ++disk_hits;
        disk_hit_bytes += (*hit)->size();
        InsertMemory(key, *hit);
        out[i] = std::move(hit);
        continue;
      }
      ++disk_misses;
      // Damaged: already quarantined by the tier; refetched below.
      if (absl::IsDataLoss(hit.status())) ++disk_corrupt;
    }
    missing.push_back(key);
    missing_at.push_back(i);
  }
  c->memory.hits.fetch_add(mem_hits, std::memory_order_relaxed);
  c->memory.hit_bytes.fetch_add(mem_hit_bytes, std::memory_order_relaxed);
  c->memory.misses.fetch_add(mem_misses, std::memory_order_relaxed);
  c->disk.hits.fetch_add(disk_hits, std::memory_order_relaxed);
  c->disk.hit_bytes.fetch_add(disk_hit_bytes, std::memory_order_relaxed);
  c->disk.misses.fetch_add(disk_misses, std::memory_order_relaxed);
  c->disk.corrupt.fetch_add(disk_corrupt, std::memory_order_relaxed);
  size_t sourced = missing.empty() ? 0 : FetchMissing(missing, missing_at, &out, c);
  if (from_source != nullptr) *from_source = sourced;
  uint64_t reads = 0, read_bytes = 0;
  for (const absl::StatusOr<Blob>& r : out) {
    if (r.ok()) {
      ++reads;
      read_bytes += (*r)->size();
    }
  }
  c->reads.fetch_add(reads, std::memory_order_relaxed);
  c->read_bytes.fetch_add(read_bytes, std::memory_order_relaxed);
  return out;
}

size_t DataCache::FetchMissing(const std::vector<std::string>& keys, const std::vector<size_t>& at,
                               std::vector<absl::StatusOr<Blob>>* out, Counters* c) {
  std::vector<size_t> all(keys.size());
  for (size_t j = 0; j < keys.size(); ++j) all[j] = j;
  if (disk_ == nullptr || disk_->Full()) {
    FetchFromSource(keys, at, all, /*claimed=*/false, out, c);
    return keys.size();
  }
  // Claim each miss; what another process has claimed, it is fetching.
  std::vector<size_t> mine, theirs, unclaimed;
  auto sort = [&](size_t j) {
    switch (disk_->TryClaim(keys[j])) {
      case SharedDirectory::Claim::kClaimed:
        mine.push_back(j);
        break;
      case SharedDirectory::Claim::kBusy:
        theirs.push_back(j);
        break;
      case SharedDirectory::Claim::kNone:
        unclaimed.push_back(j);
        break;
    }
  };
  for (size_t j : all) sort(j);
  size_t sourced = 0;
  uint64_t disk_hits = 0, disk_hit_bytes = 0;
  const absl::Time give_up = absl::Now() + options_.claim_wait;
  absl::Duration poll = absl::Milliseconds(1);
  while (true) {
    // Published between the miss and the claim (or while waiting)?
    auto on_disk = [&](std::vector<size_t>* which, bool claimed) {
      std::vector<size_t> absent;
      for (size_t j : *which) {
        absl::StatusOr<Blob> hit = disk_->Lookup(keys[j]);
        if (!hit.ok()) {
          absent.push_back(j);
          continue;
        }
        if (claimed) disk_->ReleaseClaim(keys[j]);
        ++disk_hits;
        disk_hit_bytes += (*hit)->size();
        InsertMemory(keys[j], *hit);
        (*out)[at[j]] = std::move(hit);
      }
      which->swap(absent);
    };
    on_disk(&mine, true);
    on_disk(&unclaimed, false);
    FetchFromSource(keys, at, mine, /*claimed=*/true, out, c);
    FetchFromSource(keys, at, unclaimed, /*claimed=*/false, out, c);
    sourced += mine.size() + unclaimed.size();
    unclaimed.clear();
    if (theirs.empty()) break;
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Milliseconds(20));
    // A claim that went away: the entry is on disk, or its holder gave
    // up or died; either way it is ours to read or fetch now.
    mine.clear();
    std::vector<size_t> waiting;
    waiting.swap(theirs);
    for (size_t j : waiting) sort(j);
    if (!theirs.empty() && absl::Now() >= give_up) {
      FetchFromSource(keys, at, theirs, /*claimed=*/false, out, c);  // a hung holder
      sourced += theirs.size();
      theirs.clear();
    }
  }
  c->disk.hits.fetch_add(disk_hits, std::memory_order_relaxed);
  c->disk.hit_bytes.fetch_add(disk_hit_bytes, std::memory_order_relaxed);
  return sourced;
}

void DataCache::FetchFromSource(const std::vector<std::string>& keys, const std::vector<size_t>& at,
                                const std::vector<size_t>& which, bool claimed,
                                std::vector<absl::StatusOr<Blob>>* out, Counters* c) {
  if (which.empty()) return;
  std::vector<std::string> ask;
  ask.reserve(which.size());
  for (size_t j : which) ask.push_back(keys[j]);
  std::vector<absl::StatusOr<Blob>> fetched = source_->GetBatch(ask);
  uint64_t remote_bytes = 0, remote_errors = 0;
  std::vector<DiskFill> disk_fills;
  for (size_t i = 0; i < fetched.size(); ++i) {
    bool to_disk = false;
    if (fetched[i].ok()) {
      remote_bytes += (*fetched[i])->size();
      bool in_memory = InsertMemory(ask[i], *fetched[i]);
      to_disk = disk_ != nullptr && (!in_memory || options_.disk_includes_memory);
      if (to_disk) disk_fills.push_back({ask[i], *fetched[i], claimed});
    } else {
      ++remote_errors;
    }
    if (claimed && !to_disk) disk_->ReleaseClaim(ask[i]);  // nothing to wait for
    (*out)[at[which[i]]] = std::move(fetched[i]);
  }
  InsertDiskMany(std::move(disk_fills));
  c->remote_reads.fetch_add(fetched.size(), std::memory_order_relaxed);
  c->remote_bytes.fetch_add(remote_bytes, std::memory_order_relaxed);
  c->remote_errors.fetch_add(remote_errors, std::memory_order_relaxed);
}

TierStats DataCache::Snapshot(const TierCounters& c, const Warmth& w, const CacheTier* tier) const {
  TierStats s;
  s.hits = c.hits.load();
  s.misses = c.misses.load();
  s.hit_bytes = c.hit_bytes.load();
  s.inserts = c.inserts.load();
  s.rejected_full = c.rejected_full.load();
  s.rejected_too_big = c.rejected_too_big.load();
  s.write_errors = c.write_errors.load();
  s.write_dropped = c.write_dropped.load();
  s.corrupt = c.corrupt.load();
  if (tier != nullptr) {
    s.used_bytes = tier->used_bytes();
    s.budget_bytes = tier->budget_bytes();
  }
  int64_t full = w.first_full_ns.load(), last = w.last_insert_ns.load();
  int64_t warm = full >= 0 ? full : last;
  s.warm_seconds = warm >= 0 ? warm / 1e9 : -1;
  return s;
}

std::vector<EpochStats> DataCache::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  std::vector<EpochStats> out;
  absl::Time now = absl::Now();
  for (const auto& [epoch, c] : epochs_) {
    EpochStats e;
    e.epoch = epoch;
    e.reads = c->reads.load();
    e.read_bytes = c->read_bytes.load();
    e.memory = Snapshot(c->memory, memory_warmth_, memory_.get());
    e.disk = Snapshot(c->disk, disk_warmth_, disk_.get());
    e.remote_reads = c->remote_reads.load();
    e.remote_bytes = c->remote_bytes.load();
    e.remote_errors = c->remote_errors.load();
    e.stall_seconds = c->stall_ns.load() / 1e9;
    e.wall_seconds = absl::ToDoubleSeconds((c->ended ? c->end : now) - c->begin);
    out.push_back(e);
  }
  return out;
}

}  // namespace cache
}  // namespace gradwire
