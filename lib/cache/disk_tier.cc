#include "gradwire/lib/cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/disk_entry.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {
namespace {

constexpr absl::string_view kEntrySuffix = ".gwc";
constexpr absl::string_view kQuarantineDir = "quarantine";

// An entry file open for reading, closed on scope exit.
struct OpenEntry {
  int fd = -1;
  uint64_t size = 0;
  ~OpenEntry() {
    if (fd >= 0) close(fd);
  }
};

// Opens `path` and reads its size; NotFound if it is gone.
// (A FIFO, device or directory put where an entry was is refused without
// blocking: OpenRegularFile opens without waiting for a FIFO's writer.)
absl::Status OpenEntryFile(const std::string& path, OpenEntry* e) {
  absl::StatusOr<int> fd = OpenRegularFile(path, path);
  if (!fd.ok()) return fd.status();
  e->fd = *fd;
  struct stat st;
  if (fstat(e->fd, &st) != 0) return ErrnoToStatus(absl::StrCat("stat ", path), errno);
  e->size = static_cast<uint64_t>(st.st_size);
  return absl::OkStatus();
}

}  // namespace

std::string DiskTier::EntryFileName(uint64_t version, absl::string_view key) {
  // Two independent 64-bit hashes: a collision would need both to collide,
  // and even then the key stored in the header keeps it from being served.
  return absl::StrFormat("%016x%016x%s", XXH64(key.data(), key.size(), version),
                         XXH64(key.data(), key.size(), ~version), kEntrySuffix);
}

uint64_t DiskTier::EntryBytes(absl::string_view key, uint64_t value_bytes) {
  return kEntryHeaderBytes + key.size() + value_bytes;
}

DiskTier::DiskTier(Options options) : options_(std::move(options)) {}

namespace {

// The tier removes files by name in its directory (stale temp files,
// corrupt entries, quarantine/): it takes only a directory that holds
// nothing else, so that pointed at a home directory or /dev it refuses
// instead of deleting whatever matches.
absl::Status CheckOwnDirectory(const std::string& dir) {
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return absl::OkStatus();  // missing: Open creates it
  std::string foreign;
  while (struct dirent* d = readdir(listing)) {
    const absl::string_view name = d->d_name;
    if (name == "." || name == ".." || name == kQuarantineDir ||
        name == SharedDirectory::kFileName || absl::EndsWith(name, kEntrySuffix) ||
        IsTempFileName(name)) {
      continue;
    }
    foreign = std::string(name);
    break;
  }
  closedir(listing);
  if (foreign.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "disk tier: ", dir, " holds files that are not the cache's (", absl::CHexEscape(foreign),
      "); the cache removes files by name in its directory, so give it one of its own (new "
      "or empty)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(Options options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("disk tier: empty directory");
  if (options.dir.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("disk tier: the directory's path holds a NUL byte");
  }
  GRADWIRE_RETURN_IF_ERROR(CheckOwnDirectory(options.dir));
  for (const std::string& d : {options.dir, absl::StrCat(options.dir, "/", kQuarantineDir)}) {
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(absl::StrCat("disk tier: create ", d), errno);
    }
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(options)));
  GRADWIRE_RETURN_IF_ERROR(tier->Load());
  return tier;
}

absl::Status DiskTier::Load() {
  const std::string& dir = options_.dir;
  // Quarantined files were kept for inspection since the last Open. The
  // directory is opened without following a link (one put in its place
  // would have had its target emptied), and only the regular files in it
  // are removed, relative to it.
  std::string qdir = absl::StrCat(dir, "/", kQuarantineDir);
  const int qfd = open(qdir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (qfd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
    // Not our directory: a link or a file. Put ours back in its place.
    if (unlink(qdir.c_str()) != 0 || mkdir(qdir.c_str(), 0755) != 0) {
      return ErrnoToStatus(absl::StrCat("disk tier: replace ", qdir), errno);
    }
  } else if (qfd >= 0) {
    if (DIR* q = fdopendir(qfd)) {
      while (struct dirent* d = readdir(q)) {
        struct stat st;
        if (d->d_name[0] != '.' && fstatat(qfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
          unlinkat(qfd, d->d_name, 0);
        }
      }
      closedir(q);  // closes qfd
    } else {
      close(qfd);
    }
  }
  GRADWIRE_ASSIGN_OR_RETURN(shared_, SharedDirectory::Open(dir));
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return ErrnoToStatus(absl::StrCat("disk tier: list ", dir), errno);
  std::vector<std::string> names;
  while (struct dirent* d = readdir(listing)) names.emplace_back(d->d_name);
  closedir(listing);

  bool removed_any = false;
  uint64_t recount = 0;  // alone: what the entry files hold
  std::vector<std::string> entry_names;
  for (const std::string& name : names) {
    if (IsTempFileName(name)) {
      // Its writer died (a live one holds its lock; see kCreatingPrefix for
      // one caught between open and lock): its reservation is lost ledger
      // room until a lone opener recounts, as below.
      absl::StatusOr<bool> removed = RemoveAbandonedTempFile(
          dir, name, shared_->alone() ? TempWriters::kNoneAlive : TempWriters::kMayBeAlive);
      if (removed.ok() && *removed) {
        ++report_.temp_files_removed;
        removed_any = true;
      }
    } else if (absl::EndsWith(name, kEntrySuffix)) {
      entry_names.push_back(name);
      struct stat st;
      if (shared_->alone() && stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0) {
        recount += static_cast<uint64_t>(st.st_size);
      }
    }
  }
  // No one else has the directory open (they wait in Open until Share):
  // the ledger is what the entries hold; the checks below subtract what
  // they remove.
  // (A ledger that cannot be written, on a full disk, fails the writes
  // that need it, not the reads.)
  if (shared_->alone()) shared_->SetBytes(recount).IgnoreError();
  shared_->Share();

  std::vector<std::pair<std::string, uint64_t>> loaded;  // key, bytes
  for (const std::string& name : entry_names) {
    std::string path = absl::StrCat(dir, "/", name);
    OpenEntry file;
    if (!OpenEntryFile(path, &file).ok()) continue;  // vanished (another process evicted it)
    if (file.size > options_.budget_bytes) {
      // Larger than the whole budget: not something this tier keeps, and
      // not worth reading to find out what it is.
      RemoveFile(name, file.size);
      ++report_.over_budget_removed;
      removed_any = true;
      continue;
    }
    absl::StatusOr<EntryHeader> entry = ReadEntryHeader(file.fd, file.size);
    absl::Status valid = entry.status();
    if (valid.ok() && options_.verify_on_open) valid = VerifyEntryValue(file.fd, *entry);
    if (valid.ok() && entry->version != options_.dataset_version) {
      // A stale entry of another dataset version: never served, so its
      // space is better given to the current version.
      RemoveFile(name, file.size);
      ++report_.stale_removed;
      removed_any = true;
      continue;
    }
    if (!valid.ok()) {
      Quarantine(name, file.size).IgnoreError();
      ++report_.corrupt_quarantined;
      continue;
    }
    if (EntryFileName(entry->version, entry->key) != name) {
      // A valid entry under another key's name: moved to its own name.
      ++report_.misplaced_repaired;
      removed_any = true;
      if (!Rehome(name, *entry, file.size)) continue;
    }
    loaded.emplace_back(entry->key, file.size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, bytes] : loaded) {
    if (shared_->alone() && used_ + bytes > options_.budget_bytes) {
      // The budget shrank since these were written: honour the cap.
      RemoveFile(EntryFileName(options_.dataset_version, key), bytes);
      ++report_.over_budget_removed;
      removed_any = true;
      continue;
    }
    AddToIndexLocked(key, bytes);
  }
  report_.entries = index_.size();
  report_.bytes = used_;
  if (removed_any) return SyncDirectory(dir);
  return absl::OkStatus();
}

void DiskTier::AddToIndexLocked(const std::string& key, uint64_t bytes) {
  if (index_.count(key) > 0) return;
  lru_.push_front(key);
  index_.emplace(key, IndexEntry{bytes, lru_.begin()});
  used_ += bytes;
}

void DiskTier::RemoveFromIndex(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  used_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

absl::Status DiskTier::Quarantine(const std::string& file, uint64_t bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string from = absl::StrCat(options_.dir, "/", file);
  std::string to = absl::StrCat(options_.dir, "/", kQuarantineDir, "/", file, ".", getpid(), ".",
                                counter.fetch_add(1));
  quarantined_.fetch_add(1, std::memory_order_relaxed);
  if (rename(from.c_str(), to.c_str()) == 0) {
    shared_->Subtract(bytes);
    return absl::OkStatus();
  }
  if (!RemoveFile(file, bytes) && errno != ENOENT) {
    return ErrnoToStatus(absl::StrCat("disk tier: quarantine ", from), errno);
  }
  return absl::OkStatus();
}

bool DiskTier::RemoveFile(const std::string& file, uint64_t bytes) {
  if (unlink(absl::StrCat(options_.dir, "/", file).c_str()) != 0) return false;
  shared_->Subtract(bytes);  // only the process that removed it subtracts
  return true;
}

bool DiskTier::Rehome(const std::string& file, const EntryHeader& entry, uint64_t bytes) {
  const std::string from = absl::StrCat(options_.dir, "/", file);
  const std::string to = absl::StrCat(options_.dir, "/", EntryFileName(entry.version, entry.key));
  // link + unlink: never replaces an entry already under the right name.
  if (entry.version == options_.dataset_version && link(from.c_str(), to.c_str()) == 0) {
    unlink(from.c_str());  // the bytes stay, under the new name
    return true;
  }
  RemoveFile(file, bytes);
  return false;
}

SharedDirectory::Claim DiskTier::TryClaim(absl::string_view key) {
  return shared_->TryClaim(XXH64(key.data(), key.size(), options_.dataset_version));
}

void DiskTier::ReleaseClaim(absl::string_view key) {
  shared_->ReleaseClaim(XXH64(key.data(), key.size(), options_.dataset_version));
}

bool DiskTier::Full() const {
  const uint64_t smallest = smallest_entry_.load(std::memory_order_relaxed);
  return options_.policy == EvictionPolicy::kFillOnce && smallest != UINT64_MAX &&
         shared_->Bytes(options_.budget_bytes) + smallest > options_.budget_bytes;
}

absl::StatusOr<Blob> DiskTier::Lookup(absl::string_view key_view) {
  std::string key(key_view);
  std::string file = EntryFileName(options_.dataset_version, key);
  bool indexed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    indexed = it != index_.end();
    if (indexed && options_.policy == EvictionPolicy::kLru) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
  }
  // Not in our index: another process sharing the directory may have
  // published it, so look (a failed open is cheap).
  std::string path = absl::StrCat(options_.dir, "/", file);
  // The common miss, cheaply: no error text formatted for a file that is
  // simply not there.
  if (!indexed && access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return absl::NotFoundError("disk tier miss");
  }
  OpenEntry entry_file;
  absl::Status opened = OpenEntryFile(path, &entry_file);
  if (!opened.ok()) {
    if (indexed) RemoveFromIndex(key);  // evicted by another process
    if (absl::IsNotFound(opened)) return absl::NotFoundError("disk tier miss");
    return opened;
  }
  absl::StatusOr<EntryHeader> entry =
      entry_file.size > options_.budget_bytes
          ? absl::DataLossError("larger than the tier's whole budget")
          : ReadEntryHeader(entry_file.fd, entry_file.size);
  if (entry.ok() && (entry->key != key || entry->version != options_.dataset_version)) {
    // A valid entry of another key under this key's name (copied or moved
    // there from outside): give it back its own name, and let this key be
    // a miss that the next fill writes, rather than a miss every epoch.
    RemoveFromIndex(key);
    Rehome(file, *entry, entry_file.size);
    return absl::NotFoundError("disk tier miss (the file held another entry; moved)");
  }
  absl::StatusOr<std::string> value =
      entry.ok() ? ReadEntryValue(entry_file.fd, *entry) : entry.status();
  if (!value.ok()) {
    RemoveFromIndex(key);
    GRADWIRE_RETURN_IF_ERROR(Quarantine(file, entry_file.size));
    return absl::DataLossError(absl::StrCat("disk tier: entry for '", key, "' in ", path,
                                            " is damaged (", value.status().message(),
                                            "); quarantined"));
  }
  if (!indexed) {
    std::lock_guard<std::mutex> lock(mu_);
    AddToIndexLocked(key, entry_file.size);
  }
  return MakeBlob(*std::move(value));
}

bool DiskTier::Contains(absl::string_view key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(std::string(key)) > 0) return true;
  }
  std::string path = absl::StrCat(options_.dir, "/", EntryFileName(options_.dataset_version, key));
  return access(path.c_str(), F_OK) == 0;
}

uint64_t DiskTier::used_bytes() const { return shared_->Bytes(options_.budget_bytes); }

uint64_t DiskTier::entry_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

absl::Status DiskTier::Reserve(const std::string& key, uint64_t bytes, bool* already_present) {
  std::lock_guard<std::mutex> lock(mu_);
  *already_present = index_.count(key) > 0;
  if (*already_present) return absl::OkStatus();
  uint64_t smallest = smallest_entry_.load(std::memory_order_relaxed);
  while (bytes < smallest && !smallest_entry_.compare_exchange_weak(smallest, bytes)) {
  }
  const uint64_t budget = options_.budget_bytes;
  return shared_->Update(
      [&](uint64_t* used) -> absl::Status {
        if (options_.policy == EvictionPolicy::kLru) {
          // This process's least recent entries make room; one another
          // process removed meanwhile gave its bytes back already.
          while (*used + bytes > budget && !lru_.empty()) {
            const std::string victim = lru_.back();
            auto it = index_.find(victim);
            const uint64_t victim_bytes = it->second.bytes;
            used_ -= victim_bytes;
            index_.erase(it);
            lru_.pop_back();
            const std::string file =
                absl::StrCat(options_.dir, "/", EntryFileName(options_.dataset_version, victim));
            if (unlink(file.c_str()) == 0) *used -= std::min(*used, victim_bytes);
          }
        }
        if (*used + bytes > budget) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "disk tier full (", *used, " of ", budget,
              " bytes used or being written by the processes sharing it",
              options_.policy == EvictionPolicy::kFillOnce ? "; fill-once admits no more" : "",
              ")"));
        }
        *used += bytes;
        return absl::OkStatus();
      },
      budget);
}

absl::Status DiskTier::StartWrite(const std::string& key, const Blob& value, PendingWrite* w) {
  if (value == nullptr) return absl::InvalidArgumentError("disk tier: null value");
  if (key.empty() || key.size() > kMaxEntryKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk tier: keys are 1 to ", kMaxEntryKeyBytes, " bytes, not ", key.size()));
  }
  w->key = key;
  w->bytes = EntryBytes(key, value->size());
  if (w->bytes > options_.budget_bytes) {
    return absl::OutOfRangeError(absl::StrCat("disk tier: '", key, "' needs ", w->bytes,
                                              " bytes, more than the tier's whole budget of ",
                                              options_.budget_bytes));
  }
  GRADWIRE_RETURN_IF_ERROR(Reserve(key, w->bytes, &w->present));
  if (w->present) return absl::OkStatus();
  absl::Status status = [&]() -> absl::Status {
    GRADWIRE_ASSIGN_OR_RETURN(TempFile temp, TempFile::Create(options_.dir));
    // One write per entry: header, key and value together.
    std::string bytes = EncodeEntryHead(key, options_.dataset_version, *value);
    bytes += *value;
    GRADWIRE_RETURN_IF_ERROR(temp.Append(bytes));
    w->temp.emplace(std::move(temp));
    return absl::OkStatus();
  }();
  if (!status.ok()) FinishWrite(w, status).IgnoreError();
  return status;
}

absl::Status DiskTier::FinishWrite(PendingWrite* w, absl::Status status) {
  if (w->present) return absl::OkStatus();
  bool duplicate = false;
  if (status.ok() && w->temp.has_value()) {
    // Never over an existing file: another process published this entry
    // meanwhile (the same bytes), and the ledger counts that one.
    status = w->temp->PublishAsNew(EntryFileName(options_.dataset_version, w->key));
    duplicate = absl::IsAlreadyExists(status);
    if (duplicate) status = absl::OkStatus();
  }
  w->temp.reset();  // removes the temp file if it was not published
  if (!status.ok() || duplicate) shared_->Subtract(w->bytes);
  std::lock_guard<std::mutex> lock(mu_);
  w->present = true;  // released: a second Finish is a no-op
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("disk tier: writing '", w->key,
                                                    "' failed: ", status.message()));
  }
  AddToIndexLocked(w->key, w->bytes);
  return absl::OkStatus();
}

absl::Status DiskTier::Insert(absl::string_view key, const Blob& value) {
  PendingWrite w;
  absl::Status status = StartWrite(std::string(key), value, &w);
  if (!status.ok() || w.present) return status;
  if (options_.sync) status = w.temp->Sync();
  GRADWIRE_RETURN_IF_ERROR(FinishWrite(&w, status));
  return options_.sync ? SyncDirectory(options_.dir) : absl::OkStatus();
}

std::vector<absl::Status> DiskTier::InsertBatch(
    const std::vector<std::pair<std::string, Blob>>& entries) {
  // Group commit: write every temp file, make all their data durable with
  // one syncfs instead of one journal commit per file, then rename them
  // all and sync the directory once.
  std::vector<absl::Status> out;
  std::vector<PendingWrite> writes(entries.size());
  int sync_fd = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    out.push_back(StartWrite(entries[i].first, entries[i].second, &writes[i]));
    if (out.back().ok() && !writes[i].present && sync_fd < 0) sync_fd = writes[i].temp->fd();
  }
  absl::Status synced;
  if (options_.sync && sync_fd >= 0 && syncfs(sync_fd) != 0) {
    synced = ErrnoToStatus(absl::StrCat("syncfs on ", options_.dir), errno);
  }
  bool published = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!out[i].ok() || writes[i].present) continue;
    out[i] = FinishWrite(&writes[i], synced);
    published |= out[i].ok();
  }
  if (published && options_.sync) {
    absl::Status dir_synced = SyncDirectory(options_.dir);
    if (!dir_synced.ok()) {
      for (absl::Status& s : out) {
        if (s.ok()) s = dir_synced;
      }
    }
  }
  return out;
}

}  // namespace cache
}  // namespace gradwire
