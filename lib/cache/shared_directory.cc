#include "gradwire/lib/cache/shared_directory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {
namespace {

constexpr absl::string_view kLedgerMagic = "GWBL";
constexpr uint32_t kLedgerVersion = 1;
constexpr size_t kLedgerBytes = 4 + 4 + 8 + kEnvelopeChecksumBytes;

// Lock regions of the file (locks are advisory: they overlap the ledger's
// bytes harmlessly).
constexpr off_t kLedgerLock = 0;
constexpr off_t kPresenceLock = 1;
constexpr off_t kMemberBase = off_t{1} << 40;  // + member number
constexpr uint64_t kMaxMember = 0xffff;
// The claim table: 2^18 words (2 MiB) at byte 4096 of the file, allocated
// up front: a shared mapping of a hole faults (SIGBUS) when the filesystem
// is full.
constexpr off_t kTableOffset = 4096;
constexpr int kTableBits = 18;
constexpr uint64_t kTableWords = uint64_t{1} << kTableBits;
constexpr size_t kTableBytes = kTableWords * sizeof(uint64_t);
// A word: entry tag (40 bits of its hash above the table index) << 16 | member.
constexpr int kTagShift = 16;
constexpr uint64_t kTagMask = (uint64_t{1} << 40) - 1;

// The ledger lock is held for a read, a write and perhaps a few unlinks;
// presence exclusively only while a lone opener recounts (a stat pass).
constexpr absl::Duration kLedgerWait = absl::Seconds(30);
constexpr absl::Duration kPresenceWait = absl::Minutes(2);

bool SetLock(int fd, short type, off_t at) {
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = at;
  lock.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

// Polls for the lock until `wait` has passed: every wait has a deadline.
absl::Status WaitLock(int fd, short type, off_t at, absl::Duration wait, absl::string_view what) {
  const absl::Time deadline = absl::Now() + wait;
  absl::Duration sleep = absl::Microseconds(100);
  while (!SetLock(fd, type, at)) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
      return ErrnoToStatus(absl::StrCat("disk tier: lock ", what), errno);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "disk tier: ", what, " held by another process for ", absl::FormatDuration(wait)));
    }
    absl::SleepFor(sleep);
    sleep = std::min(sleep * 2, absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedDirectory>> SharedDirectory::Open(const std::string& dir) {
  std::string path = absl::StrCat(dir, "/", kFileName);
  // O_NOFOLLOW: a symbolic link put in its place is refused, not followed
  // (the ledger would be written into whatever it points at).
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("disk tier: ", path,
                     " is a symbolic link; the cache writes only files of its own there "
                     "(remove it, or choose another disk directory)"));
  }
  if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM)) {
    // A read-only directory still serves what it holds; nothing is
    // written, so there is no budget to keep and nothing to claim.
    std::unique_ptr<SharedDirectory> shared(new SharedDirectory(std::move(path), -1));
    return shared;
  }
  if (fd < 0) return ErrnoToStatus(absl::StrCat("disk tier: open ", path), errno);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("disk tier: ", path, " is not a regular file; remove it"));
  }
  std::unique_ptr<SharedDirectory> shared(new SharedDirectory(std::move(path), fd));
  // Exclusive presence: nobody else has the directory open. Held until
  // Share(), so others wait for the recount instead of writing under it.
  shared->alone_ = SetLock(fd, F_WRLCK, kPresenceLock);
  if (!shared->alone_) {
    absl::Status present = WaitLock(fd, F_RDLCK, kPresenceLock, kPresenceWait, "the directory");
    if (!present.ok()) return present;
  }
  absl::Status mapped = shared->MapClaims();
  if (!mapped.ok()) return mapped;
  return shared;
}

SharedDirectory::~SharedDirectory() {
  if (claims_ != nullptr) munmap(claims_, kTableBytes);
  if (fd_ >= 0) close(fd_);  // drops every lock this process holds, its member lock too
}

absl::Status SharedDirectory::MapClaims() {
  // Allocates what is not yet (a no-op once done).
  if (posix_fallocate(fd_, kTableOffset, kTableBytes) != 0) {
    // No room for the table (a full filesystem): no claims; readers
    // sharing the directory may then fetch an entry more than once.
    return absl::OkStatus();
  }
  void* table = mmap(nullptr, kTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, kTableOffset);
  if (table == MAP_FAILED) return ErrnoToStatus(absl::StrCat("disk tier: map ", path_), errno);
  claims_ = static_cast<uint64_t*>(table);
  for (uint64_t m = 1; m <= kMaxMember && member_ == 0; ++m) {
    if (SetLock(fd_, F_WRLCK, kMemberBase + static_cast<off_t>(m))) member_ = m;
  }
  if (member_ == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("disk tier: ", kMaxMember, " processes already share ", path_));
  }
  // Claims left by a dead process that held this member number (all of
  // them, if no one else has the directory open) are void.
  for (uint64_t i = 0; i < kTableWords; ++i) {
    uint64_t word = __atomic_load_n(&claims_[i], __ATOMIC_RELAXED);
    if (word != 0 && (alone_ || (word & kMaxMember) == member_)) {
      __atomic_compare_exchange_n(&claims_[i], &word, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
  }
  return absl::OkStatus();
}

bool SharedDirectory::MemberAlive(uint64_t member) const {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = kMemberBase + static_cast<off_t>(member);
  lock.l_len = 1;
  if (fcntl(fd_, F_OFD_GETLK, &lock) != 0) return true;  // unknown: assume alive
  return lock.l_type != F_UNLCK;
}

void SharedDirectory::Share() {
  if (alone_ && fd_ >= 0)
    SetLock(fd_, F_RDLCK, kPresenceLock);  // converts in place: never unlocked
}

absl::StatusOr<uint64_t> SharedDirectory::ReadLocked() const {
  if (fd_ < 0) return 0;  // read-only: nothing is written
  char buffer[kLedgerBytes];
  ssize_t n = pread(fd_, buffer, sizeof(buffer), 0);
  if (n == 0 || std::all_of(buffer, buffer + n, [](char c) { return c == 0; })) {
    return 0;  // a new directory: the ledger was never written
  }
  if (n != static_cast<ssize_t>(sizeof(buffer))) {
    return absl::DataLossError(absl::StrCat(path_, ": truncated budget ledger"));
  }
  absl::StatusOr<Envelope> e = OpenEnvelope(absl::string_view(buffer, sizeof(buffer)), kLedgerMagic,
                                            kLedgerVersion, kLedgerVersion, "budget ledger");
  if (!e.ok()) return e.status();
  ByteReader in(e->body, "budget ledger");
  uint64_t bytes = 0;
  absl::Status s = in.ReadFixed64("bytes", &bytes);
  if (s.ok()) s = in.ExpectDone();
  if (!s.ok()) return s;
  return bytes;
}

absl::Status SharedDirectory::WriteLocked(uint64_t bytes) {
  std::string record = StartEnvelope(kLedgerMagic, kLedgerVersion);
  PutFixed64(&record, bytes);
  SealEnvelope(&record);
  if (pwrite(fd_, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    return ErrnoToStatus(absl::StrCat("disk tier: write ", path_), errno);
  }
  return absl::OkStatus();
}

absl::Status SharedDirectory::Update(const std::function<absl::Status(uint64_t* bytes)>& update,
                                     uint64_t unreadable_as) {
  if (fd_ < 0) {
    return absl::PermissionDeniedError(absl::StrCat("disk tier: ", path_, " is read-only"));
  }
  std::lock_guard<std::mutex> lock(ledger_mu_);
  absl::Status locked = WaitLock(fd_, F_WRLCK, kLedgerLock, kLedgerWait, "the budget ledger");
  if (!locked.ok()) return locked;
  absl::StatusOr<uint64_t> read = ReadLocked();
  uint64_t bytes = read.ok() ? *read : unreadable_as;
  absl::Status s = update(&bytes);
  if (s.ok()) s = WriteLocked(bytes);
  SetLock(fd_, F_UNLCK, kLedgerLock);
  return s;
}

void SharedDirectory::Subtract(uint64_t bytes) {
  Update(
      [bytes](uint64_t* total) {
        *total -= std::min(*total, bytes);
        return absl::OkStatus();
      },
      0)
      .IgnoreError();  // a ledger left high loses room, never exceeds it
}

absl::Status SharedDirectory::SetBytes(uint64_t bytes) {
  return Update(
      [bytes](uint64_t* total) {
        *total = bytes;
        return absl::OkStatus();
      },
      bytes);
}

uint64_t SharedDirectory::Bytes(uint64_t unreadable_as) const {
  absl::StatusOr<uint64_t> read = ReadLocked();
  return read.ok() ? *read : unreadable_as;
}

SharedDirectory::Claim SharedDirectory::TryClaim(uint64_t entry_hash) {
  uint64_t* word = &claims_[entry_hash & (kTableWords - 1)];
  if (claims_ == nullptr) return Claim::kNone;
  const uint64_t tag = (entry_hash >> kTableBits) & kTagMask;
  const uint64_t mine = tag << kTagShift | member_;
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t held = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (held != 0) {
      const uint64_t holder = held & kMaxMember;
      // Held for this entry, or for another one sharing the word: either
      // way wait, so that no entry is ever fetched twice.
      if (holder == member_ || MemberAlive(holder)) return Claim::kBusy;
      // Its claimant died: the word is free to take over.
    }
    if (__atomic_compare_exchange_n(word, &held, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      return Claim::kClaimed;
    }
  }
  return Claim::kBusy;  // contended: look again on the next poll
}

void SharedDirectory::ReleaseClaim(uint64_t entry_hash) {
  if (claims_ == nullptr) return;
  uint64_t* word = &claims_[entry_hash & (kTableWords - 1)];
  uint64_t mine = ((entry_hash >> kTableBits) & kTagMask) << kTagShift | member_;
  __atomic_compare_exchange_n(word, &mine, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

}  // namespace cache
}  // namespace gradwire
