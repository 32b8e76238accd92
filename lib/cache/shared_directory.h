// SharedDirectory: what the processes sharing one disk-tier directory (one
// per GPU, say) coordinate through. One small file, <dir>/.gwshared, holds
// the directory's budget ledger; byte-range OFD locks on it (fcntl
// F_OFD_SETLK) serialize ledger updates, mark who has the directory open,
// and give each entry a fetch claim. OFD locks die with their process, so
// a crash leaves nothing that blocks anyone (like the temp-file locks of
// atomic_file.h); the file itself is never deleted and harmless.
//
// The ledger: bytes reserved by every process for entries published or
// being written. A writer reserves before writing and gives the bytes back
// if the write fails; whoever unlinks a counted file subtracts it. So the
// ledger never counts less than the directory holds, and a budget checked
// against it holds for all processes together, at every moment. A process
// killed between reserving and publishing (or unlinking and subtracting)
// leaves the ledger high: room is lost, never exceeded, until a process
// that opens the directory alone (no other holds it open) recounts it.
// Stored as an envelope (base/envelope.h): "GWBL" | u32 1 | u64 bytes |
// u64 XXH3.
//
// Claims: before fetching a missing entry from the source, a process
// claims it; others that miss it wait for the claim to go (the entry is
// then on disk, or the claimant gave up or died) instead of fetching it
// too. Claims must stay cheap when tens of thousands are held (a prefetch
// window plus a write queue): the kernel keeps a process's byte-range locks
// of one file in a list searched on every lock (measured: 2 us per
// lock+unlock with none held, 74 us with 2,048, 6.7 ms with 16,384), so a
// claim is not a lock but a word in a table of 2^18 mapped shared from the
// file: the entry's 40-bit tag and the claimant's member number, set and
// cleared by compare-and-swap. Each process holds one OFD lock, on its
// member byte, for as long as it has the directory open; a claim whose
// member's lock is free belongs to a dead process and is taken over, so a
// claim dies with its process like a lock. Two entries in one table word
// take turns (the second waits for the first to be published). If the
// filesystem had no room for the table there are no claims (kNone) and
// sharing readers may fetch an entry more than once. The processes must
// share one host (one page cache); the ledger's locks would work over NFS.
#ifndef GRADWIRE_LIB_CACHE_SHARED_DIRECTORY_H_
#define GRADWIRE_LIB_CACHE_SHARED_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gradwire {
namespace cache {

class SharedDirectory {
 public:
  static constexpr char kFileName[] = ".gwshared";

  // Opens (creating) dir/.gwshared and marks this process present. In a
  // directory this process may not write, the result keeps no ledger
  // (Update fails: nothing can be written anyway) and no claims (kNone).
  static absl::StatusOr<std::unique_ptr<SharedDirectory>> Open(const std::string& dir);
  ~SharedDirectory();

  // True if no other process had the directory open when this one did:
  // until Share(), others wait in Open, so the opener may recount the
  // ledger (SetBytes) with no one writing.
  bool alone() const { return alone_; }
  // Lets other processes in (after the lone opener's recount).
  void Share();

  // Runs `update` on the ledger's byte count under the ledger lock (every
  // process, every thread) and stores what it leaves there. `update`'s
  // error is returned and nothing stored. A ledger that fails its checksum
  // reads as full (`unreadable_as`) until a lone opener recounts it.
  absl::Status Update(const std::function<absl::Status(uint64_t* bytes)>& update,
                      uint64_t unreadable_as);
  // Subtracts (clamped at 0): for files removed and writes abandoned.
  void Subtract(uint64_t bytes);
  // Overwrites the count (a lone opener's recount).
  absl::Status SetBytes(uint64_t bytes);
  // The count, read without the lock; `unreadable_as` if unreadable.
  uint64_t Bytes(uint64_t unreadable_as) const;

  enum class Claim {
    kClaimed,  // this process now holds it: fetch, publish, release
    kBusy,     // a live process, or another thread of this one, holds it: wait
    kNone,     // claims are off (no room for the table): fetch unclaimed
  };
  Claim TryClaim(uint64_t entry_hash);
  void ReleaseClaim(uint64_t entry_hash);

 private:
  SharedDirectory(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status MapClaims();
  bool MemberAlive(uint64_t member) const;
  absl::StatusOr<uint64_t> ReadLocked() const;
  absl::Status WriteLocked(uint64_t bytes);

  const std::string path_;
  const int fd_;
  bool alone_ = false;
  std::mutex ledger_mu_;        // OFD locks do not exclude threads sharing fd_
  uint64_t* claims_ = nullptr;  // the shared table (mmap)
  uint64_t member_ = 0;         // this process's member number, 1..65535
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_SHARED_DIRECTORY_H_
