#include "gradwire/lib/cache/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {
namespace {

// An exclusive whole-file OFD lock. OFD locks belong to the open file
// description, so (unlike classic POSIX locks) threads of one process
// exclude each other too, and they vanish when the last fd closes, i.e. at
// the latest when the process dies.
bool TryLockFd(int fd) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;
  return fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

// "<pid>.<counter>.<random>": unique across processes and calls.
std::string UniqueTempSuffix() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return absl::StrFormat("%d.%d.%016x", getpid(), counter.fetch_add(1, std::memory_order_relaxed),
                         salt);
}

}  // namespace

TempFile::TempFile(std::string dir, std::string path, int fd)
    : dir_(std::move(dir)), path_(std::move(path)), fd_(fd) {}

TempFile::TempFile(TempFile&& other) noexcept
    : dir_(std::move(other.dir_)), path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  if (this != &other) {
    Discard();
    dir_ = std::move(other.dir_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

TempFile::~TempFile() { Discard(); }

void TempFile::Discard() {
  if (fd_ >= 0) {
    unlink(path_.c_str());
    close(fd_);
    fd_ = -1;
  }
}

absl::StatusOr<TempFile> TempFile::Create(const std::string& dir) {
  const std::string suffix = UniqueTempSuffix();
  const std::string creating = absl::StrCat(dir, "/", kCreatingPrefix, suffix);
  std::string path = absl::StrCat(dir, "/", kTempPrefix, suffix);
  int fd = open(creating.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(absl::StrCat("create temp file ", creating), errno);
  // Locked before it takes the temp name that cleaners look at (see
  // kCreatingPrefix); the lock belongs to the inode, so the rename keeps it.
  int err = 0;
  if (!TryLockFd(fd) || rename(creating.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    close(fd);
    unlink(creating.c_str());
    return ErrnoToStatus(absl::StrCat("lock and name temp file ", creating), err);
  }
  return TempFile(dir, std::move(path), fd);
}

absl::Status TempFile::Append(absl::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(absl::StrCat("write ", path_), errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status TempFile::Sync() {
  if (fdatasync(fd_) != 0) return ErrnoToStatus(absl::StrCat("fdatasync ", path_), errno);
  return absl::OkStatus();
}

absl::Status TempFile::PublishAs(const std::string& name) {
  std::string target = absl::StrCat(dir_, "/", name);
  if (rename(path_.c_str(), target.c_str()) != 0) {
    return ErrnoToStatus(absl::StrCat("rename ", path_, " -> ", target), errno);
  }
  close(fd_);  // drops the lock; the file now lives under its final name
  fd_ = -1;
  return absl::OkStatus();
}

absl::Status TempFile::PublishAsNew(const std::string& name) {
  std::string target = absl::StrCat(dir_, "/", name);
  int rc = renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
    // A filesystem without RENAME_NOREPLACE: link never replaces either.
    rc = link(path_.c_str(), target.c_str());
    if (rc == 0) unlink(path_.c_str());
  }
  if (rc != 0) return ErrnoToStatus(absl::StrCat("publish ", path_, " as ", target), errno);
  close(fd_);
  fd_ = -1;
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(absl::StrCat("open directory ", dir), errno);
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoToStatus(absl::StrCat("fsync directory ", dir), err);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view data) {
  GRADWIRE_ASSIGN_OR_RETURN(TempFile temp, TempFile::Create(dir));
  GRADWIRE_RETURN_IF_ERROR(temp.Append(data));
  GRADWIRE_RETURN_IF_ERROR(temp.Sync());
  GRADWIRE_RETURN_IF_ERROR(temp.PublishAs(name));
  return SyncDirectory(dir);
}

absl::StatusOr<int> OpenRegularFile(const std::string& path, absl::string_view what) {
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the path holds a NUL byte"));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(absl::StrCat("open ", what), errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoToStatus(absl::StrCat("stat ", what), err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a regular file (",
                                                   S_ISDIR(st.st_mode)    ? "a directory"
                                                   : S_ISFIFO(st.st_mode) ? "a FIFO"
                                                                          : "a device or socket",
                                                   ")"));
  }
  return fd;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<int> opened = OpenRegularFile(path, path);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  std::string data;
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is ", st.st_size, " bytes, more than the ", max_bytes, " this file may hold"));
    }
    data.reserve(static_cast<size_t>(st.st_size));
  }
  char buffer[1 << 16];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return ErrnoToStatus(absl::StrCat("read ", path), err);
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
    if (data.size() > max_bytes) {  // grew while read
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, " holds more than the ", max_bytes, " bytes this file may hold"));
    }
  }
  close(fd);
  return data;
}

absl::Status ReadFileAt(int fd, uint64_t offset, size_t n, char* out, absl::string_view what) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(absl::StrCat("read ", what), errno);
    }
    if (got == 0) {
      return absl::DataLossError(
          absl::StrCat(what, ": ends at byte ", offset + done, ", ", n - done, " bytes short"));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

bool IsTempFileName(absl::string_view name) {
  return absl::StartsWith(name, kTempPrefix) || absl::StartsWith(name, kCreatingPrefix);
}

absl::StatusOr<bool> RemoveAbandonedTempFile(const std::string& dir, const std::string& name,
                                             TempWriters writers) {
  std::string path = absl::StrCat(dir, "/", name);
  // A young file under the creating name is left without being opened: a
  // cleaner that took its lock even for a moment (to look at its age)
  // would make its writer's lock, taken between open and rename, fail
  // (seen: 1 of ~6000 TempFile::Create calls beside a sweeping cleaner).
  const bool creating =
      writers == TempWriters::kMayBeAlive && absl::StartsWith(name, kCreatingPrefix);
  struct stat st;
  if (creating) {
    if (stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return true;  // its writer named it, or it is gone
      return ErrnoToStatus(absl::StrCat("stat temp file ", path), errno);
    }
    if (time(nullptr) - st.st_mtime < kCreatingGraceSeconds) return false;
  }
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return true;  // its writer published or removed it
    return ErrnoToStatus(absl::StrCat("open temp file ", path), errno);
  }
  if (!TryLockFd(fd)) {
    close(fd);
    return false;  // a live writer holds it
  }
  if (creating && (fstat(fd, &st) != 0 || time(nullptr) - st.st_mtime < kCreatingGraceSeconds)) {
    close(fd);
    return false;  // its writer may be about to lock it
  }
  bool removed = unlink(path.c_str()) == 0 || errno == ENOENT;
  int err = errno;
  close(fd);
  if (!removed) return ErrnoToStatus(absl::StrCat("unlink ", path), err);
  return true;
}

}  // namespace cache
}  // namespace gradwire
