#include "gradwire/lib/cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/errno_status.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace cache {
namespace {

constexpr char kMagic[8] = {'G', 'W', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr size_t kHeaderBytes = 48;
constexpr absl::string_view kEntrySuffix = ".gwc";
constexpr absl::string_view kQuarantineDir = "quarantine";

void PutLE(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string EncodeHeader(absl::string_view key, uint64_t version, absl::string_view value) {
  std::string out(kHeaderBytes, '\0');
  std::memcpy(&out[0], kMagic, sizeof(kMagic));
  PutLE(&out[8], key.size(), 4);
  PutLE(&out[16], version, 8);
  PutLE(&out[24], value.size(), 8);
  PutLE(&out[32], Checksum64(value), 8);
  out.append(key.data(), key.size());
  std::string covered = out.substr(0, 40) + std::string(key);
  PutLE(&out[40], Checksum64(covered), 8);
  return out;
}

struct ParsedEntry {
  std::string key;
  uint64_t version = 0;
  uint64_t value_offset = 0;
  uint64_t value_length = 0;
  uint64_t value_checksum = 0;
};

// Parses and checks the header of `bytes` (at least the header and key).
// DataLoss for anything inconsistent, including a file shorter than its
// header claims (a torn write that somehow got a name).
absl::StatusOr<ParsedEntry> ParseHeader(absl::string_view bytes, uint64_t file_size) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("bad magic or truncated header");
  }
  ParsedEntry e;
  uint64_t key_len = GetLE(bytes.data() + 8, 4);
  if (GetLE(bytes.data() + 12, 4) != 0 || bytes.size() < kHeaderBytes + key_len) {
    return absl::DataLossError("bad key length");
  }
  std::string covered(bytes.substr(0, 40));
  covered.append(bytes.data() + kHeaderBytes, key_len);
  if (Checksum64(covered) != GetLE(bytes.data() + 40, 8)) {
    return absl::DataLossError("header checksum mismatch");
  }
  e.key.assign(bytes.data() + kHeaderBytes, key_len);
  e.version = GetLE(bytes.data() + 16, 8);
  e.value_length = GetLE(bytes.data() + 24, 8);
  e.value_checksum = GetLE(bytes.data() + 32, 8);
  e.value_offset = kHeaderBytes + key_len;
  if (file_size != e.value_offset + e.value_length) {
    return absl::DataLossError(absl::StrCat("file has ", file_size, " bytes, header promises ",
                                            e.value_offset + e.value_length));
  }
  return e;
}

absl::Status VerifyValue(absl::string_view file_bytes, const ParsedEntry& e) {
  if (Checksum64(file_bytes.substr(e.value_offset, e.value_length)) != e.value_checksum) {
    return absl::DataLossError("value checksum mismatch");
  }
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
  return kHeaderBytes + key.size() + value_bytes;
}

DiskTier::DiskTier(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(Options options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("disk tier: empty directory");
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
  // Quarantined files were kept for inspection since the last Open.
  std::string qdir = absl::StrCat(dir, "/", kQuarantineDir);
  if (DIR* q = opendir(qdir.c_str())) {
    while (struct dirent* d = readdir(q)) {
      if (d->d_name[0] != '.') unlink(absl::StrCat(qdir, "/", d->d_name).c_str());
    }
    closedir(q);
  }
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return ErrnoToStatus(absl::StrCat("disk tier: list ", dir), errno);
  std::vector<std::string> names;
  while (struct dirent* d = readdir(listing)) names.emplace_back(d->d_name);
  closedir(listing);

  bool removed_any = false;
  std::vector<std::pair<std::string, uint64_t>> loaded;  // key, bytes
  for (const std::string& name : names) {
    std::string path = absl::StrCat(dir, "/", name);
    if (IsTempFileName(name)) {
      absl::StatusOr<bool> removed = RemoveAbandonedTempFile(dir, name);
      if (removed.ok() && *removed) {
        ++report_.temp_files_removed;
        removed_any = true;
      }
      continue;
    }
    if (!absl::EndsWith(name, kEntrySuffix)) continue;
    absl::StatusOr<std::string> bytes;
    if (options_.verify_on_open) {
      bytes = ReadWholeFile(path);
    } else {
      // Header and key only; the value is verified on lookup.
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      std::string head(kHeaderBytes + 4096, '\0');
      ssize_t n = pread(fd, &head[0], head.size(), 0);
      close(fd);
      head.resize(n > 0 ? static_cast<size_t>(n) : 0);
      bytes = std::move(head);
    }
    if (!bytes.ok()) continue;  // vanished (another process evicted it)
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    absl::StatusOr<ParsedEntry> entry = ParseHeader(*bytes, static_cast<uint64_t>(st.st_size));
    absl::Status valid = entry.status();
    if (valid.ok() && options_.verify_on_open) valid = VerifyValue(*bytes, *entry);
    if (valid.ok() && entry->version != options_.dataset_version) {
      // A stale entry of another dataset version: never served, so its
      // space is better given to the current version.
      unlink(path.c_str());
      ++report_.stale_removed;
      removed_any = true;
      continue;
    }
    if (valid.ok() && EntryFileName(entry->version, entry->key) != name) {
      valid = absl::DataLossError("file name does not match its key");
    }
    if (!valid.ok()) {
      Quarantine(name).IgnoreError();
      ++report_.corrupt_quarantined;
      continue;
    }
    loaded.emplace_back(entry->key, static_cast<uint64_t>(st.st_size));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, bytes] : loaded) {
    if (used_ + bytes > options_.budget_bytes) {
      // The budget shrank since these were written: honour the cap.
      unlink(absl::StrCat(dir, "/", EntryFileName(options_.dataset_version, key)).c_str());
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

absl::Status DiskTier::Quarantine(const std::string& file) {
  static std::atomic<uint64_t> counter{0};
  std::string from = absl::StrCat(options_.dir, "/", file);
  std::string to = absl::StrCat(options_.dir, "/", kQuarantineDir, "/", file, ".", getpid(), ".",
                                counter.fetch_add(1));
  quarantined_.fetch_add(1, std::memory_order_relaxed);
  if (rename(from.c_str(), to.c_str()) != 0 && unlink(from.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(absl::StrCat("disk tier: quarantine ", from), errno);
  }
  return absl::OkStatus();
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
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    if (indexed) RemoveFromIndex(key);  // evicted by another process
    if (absl::IsNotFound(bytes.status())) return absl::NotFoundError("disk tier miss");
    return bytes.status();
  }
  absl::StatusOr<ParsedEntry> entry = ParseHeader(*bytes, bytes->size());
  absl::Status valid = entry.status();
  if (valid.ok()) valid = VerifyValue(*bytes, *entry);
  if (valid.ok() && (entry->key != key || entry->version != options_.dataset_version)) {
    // A hash collision with another key: not damage, just not ours.
    return absl::NotFoundError("disk tier miss (file holds another key)");
  }
  if (!valid.ok()) {
    RemoveFromIndex(key);
    GRADWIRE_RETURN_IF_ERROR(Quarantine(file));
    return absl::DataLossError(absl::StrCat("disk tier: entry for '", key, "' in ", path,
                                            " is damaged (", valid.message(), "); quarantined"));
  }
  if (!indexed) {
    std::lock_guard<std::mutex> lock(mu_);
    AddToIndexLocked(key, bytes->size());
  }
  return MakeBlob(bytes->substr(entry->value_offset, entry->value_length));
}

bool DiskTier::Contains(absl::string_view key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(std::string(key)) > 0) return true;
  }
  std::string path =
      absl::StrCat(options_.dir, "/", EntryFileName(options_.dataset_version, key));
  return access(path.c_str(), F_OK) == 0;
}

uint64_t DiskTier::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t DiskTier::entry_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

absl::Status DiskTier::Reserve(const std::string& key, uint64_t bytes,
                               std::vector<std::string>* victims, bool* already_present) {
  std::lock_guard<std::mutex> lock(mu_);
  *already_present = index_.count(key) > 0;
  if (*already_present) return absl::OkStatus();
  if (options_.policy == EvictionPolicy::kLru) {
    while (used_ + pending_ + bytes > options_.budget_bytes && !lru_.empty()) {
      std::string victim = lru_.back();
      auto it = index_.find(victim);
      used_ -= it->second.bytes;
      index_.erase(it);
      lru_.pop_back();
      victims->push_back(EntryFileName(options_.dataset_version, victim));
    }
  }
  if (used_ + pending_ + bytes > options_.budget_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("disk tier full (", used_ + pending_, " of ", options_.budget_bytes,
                     " bytes used or being written", 
                     options_.policy == EvictionPolicy::kFillOnce ? "; fill-once admits no more"
                                                                  : "",
                     ")"));
  }
  pending_ += bytes;
  return absl::OkStatus();
}

absl::Status DiskTier::StartWrite(const std::string& key, const Blob& value, PendingWrite* w) {
  if (value == nullptr) return absl::InvalidArgumentError("disk tier: null value");
  w->key = key;
  w->bytes = EntryBytes(key, value->size());
  if (w->bytes > options_.budget_bytes) {
    return absl::OutOfRangeError(absl::StrCat("disk tier: '", key, "' needs ", w->bytes,
                                              " bytes, more than the tier's whole budget of ",
                                              options_.budget_bytes));
  }
  std::vector<std::string> victims;
  GRADWIRE_RETURN_IF_ERROR(Reserve(key, w->bytes, &victims, &w->present));
  if (w->present) return absl::OkStatus();
  for (const std::string& v : victims) unlink(absl::StrCat(options_.dir, "/", v).c_str());
  absl::Status status = [&]() -> absl::Status {
    GRADWIRE_ASSIGN_OR_RETURN(TempFile temp, TempFile::Create(options_.dir));
    // One write per entry: header, key and value together.
    std::string bytes = EncodeHeader(key, options_.dataset_version, *value);
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
  if (status.ok() && w->temp.has_value()) {
    status = w->temp->PublishAs(EntryFileName(options_.dataset_version, w->key));
  }
  w->temp.reset();  // removes the temp file if it was not published
  std::lock_guard<std::mutex> lock(mu_);
  pending_ -= w->bytes;
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
