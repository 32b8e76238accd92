// Publishing files so that a reader, or a process restarted after a crash,
// sees either the old content or the new one, never a torn mix (LevelDB's
// practice): write a uniquely named temp file, fsync it, rename it over the
// target, fsync the directory so the rename itself is durable.
#ifndef GRADWIRE_LIB_CACHE_ATOMIC_FILE_H_
#define GRADWIRE_LIB_CACHE_ATOMIC_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

// Temp files are named "<kTempPrefix><pid>.<counter>.<random>" so writers in
// different processes never collide and cleaners can recognise them.
inline constexpr absl::string_view kTempPrefix = ".tmp.";
// A temp file is born under "<kCreatingPrefix>..." and takes its kTempPrefix
// name only once its lock is held, so a file under a temp name is locked for
// as long as its writer lives: a cleaner never mistakes a writer between
// open and lock for a dead one. A file left under the creating name (a
// writer killed in that instant) is removed once older than
// kCreatingGrace.
inline constexpr absl::string_view kCreatingPrefix = ".new.";
inline constexpr int kCreatingGraceSeconds = 60;

// A temp file open for writing whose OFD lock (fcntl F_OFD_SETLK) is held
// while it is being written. The lock dies with the process, so a cleaner
// that can take it knows the writer is gone: no lock *files*, nothing a
// crash can leave behind that blocks anyone.
class TempFile {
 public:
  // Creates and locks a fresh temp file in `dir`.
  static absl::StatusOr<TempFile> Create(const std::string& dir);
  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) noexcept;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  // Removes the temp file if it was not published.
  ~TempFile();

  absl::Status Append(absl::string_view data);
  // fdatasync: the data is durable before the rename makes it visible.
  absl::Status Sync();
  // Renames onto dir/name (replacing it) and closes. Does not sync the
  // directory; call SyncDirectory once after one or more publishes.
  absl::Status PublishAs(const std::string& name);
  // PublishAs that never replaces: AlreadyExists if dir/name exists (the
  // temp file stays unpublished, removed by the destructor).
  absl::Status PublishAsNew(const std::string& name);

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  TempFile(std::string dir, std::string path, int fd);
  void Discard();

  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

// fsync on the directory: makes renames and unlinks in it durable.
absl::Status SyncDirectory(const std::string& dir);

// TempFile + Sync + PublishAs + SyncDirectory in one call.
absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view data);

// Reads a whole regular file of at most `max_bytes` (a manifest, a token):
// a FIFO, device or directory is InvalidArgument without blocking or
// reading it, a larger file InvalidArgument naming the limit, and a path
// holding a NUL InvalidArgument (it would be cut there).
inline constexpr uint64_t kMaxWholeFileBytes = uint64_t{64} << 20;
absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          uint64_t max_bytes = kMaxWholeFileBytes);

// open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) and a check that it is a
// regular file (a FIFO would block the opener, a device never end): the
// descriptor (the caller closes it), or the error naming `what`.
absl::StatusOr<int> OpenRegularFile(const std::string& path, absl::string_view what);

// Reads exactly `n` bytes at `offset` of the open file `fd` into `out`
// (short reads and EINTR retried). `what` names the file in errors; a file
// that ends first is DataLoss.
absl::Status ReadFileAt(int fd, uint64_t offset, size_t n, char* out, absl::string_view what);

// True if `name` is a temp file name (kTempPrefix or kCreatingPrefix).
bool IsTempFileName(absl::string_view name);

// Removes dir/name if it is a temp file whose writer is gone: its OFD lock
// can be taken and, under the creating name, it is older than
// kCreatingGraceSeconds or `writers` says no writer can be alive (a lone
// opener's sweep). Returns true if removed, false if it is kept.
enum class TempWriters { kMayBeAlive, kNoneAlive };
absl::StatusOr<bool> RemoveAbandonedTempFile(const std::string& dir, const std::string& name,
                                             TempWriters writers = TempWriters::kMayBeAlive);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_ATOMIC_FILE_H_
