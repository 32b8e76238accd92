#include "gradwire/lib/python/mapped_range.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradwire {
namespace python {
namespace {

// PROCMAP_QUERY (linux/fs.h from Linux 6.11; Debian 12's headers predate
// it): the UAPI struct, whose size is part of the ioctl's number.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;  // in
  uint64_t query_addr;   // in
  uint64_t vma_start;    // out
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;  // in/out: 0, no name wanted
  uint32_t build_id_size;  // in/out: 0, no build id wanted
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104, "the UAPI layout");
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 0x01;
constexpr uint64_t kVmaWritable = 0x02;

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;  // one past the last byte
  bool readable = false;
  bool writable = false;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// /proc/self/maps, parsed: one Mapping a line, in address order.
absl::Status ParseMaps(int fd, std::vector<Mapping>* out) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read /proc/self/maps to check the address: ", strerror(errno)));
    }
    if (got == 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  // Each line: "start-end perms offset dev inode [name]", hex addresses.
  size_t at = 0;
  while (at < text.size()) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    const char* p = text.c_str() + at;
    char* rest = nullptr;
    Mapping m;
    m.start = strtoull(p, &rest, 16);
    if (rest != nullptr && *rest == '-') {
      m.end = strtoull(rest + 1, &rest, 16);
      if (rest != nullptr && rest[0] == ' ' && rest + 3 <= text.c_str() + eol) {
        m.readable = rest[1] == 'r';
        m.writable = rest[2] == 'w';
        out->push_back(m);
      }
    }
    at = eol + 1;
  }
  return absl::OkStatus();
}

// The mapping that holds `address`, if any: by the ioctl while it works
// (*use_ioctl), else from the parsed file (read once, into *parsed).
absl::StatusOr<std::optional<Mapping>> MappingAt(int fd, uint64_t address, bool* use_ioctl,
                                                 std::optional<std::vector<Mapping>>* parsed) {
  if (*use_ioctl) {
    ProcmapQuery q;
    std::memset(&q, 0, sizeof(q));
    q.size = sizeof(q);
    q.query_addr = address;  // no flags: the mapping covering it, or ENOENT
    if (ioctl(fd, kProcmapQuery, &q) == 0) {
      return std::optional<Mapping>(Mapping{q.vma_start, q.vma_end,
                                            (q.vma_flags & kVmaReadable) != 0,
                                            (q.vma_flags & kVmaWritable) != 0});
    }
    if (errno == ENOENT) return std::optional<Mapping>();
    *use_ioctl = false;  // an older kernel (ENOTTY, EINVAL): read the file
  }
  if (!parsed->has_value()) {
    std::vector<Mapping> all;
    if (lseek(fd, 0, SEEK_SET) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot rewind /proc/self/maps to check the address: ", strerror(errno)));
    }
    if (absl::Status s = ParseMaps(fd, &all); !s.ok()) return s;
    *parsed = std::move(all);
  }
  for (const Mapping& m : **parsed) {
    if (m.start <= address && address < m.end) return std::optional<Mapping>(m);
  }
  return std::optional<Mapping>();
}

absl::Status Check(uintptr_t address, uint64_t bytes, bool use_ioctl) {
  if (bytes == 0) return absl::OkStatus();
  uint64_t end = 0;
  if (__builtin_add_overflow(uint64_t{address}, bytes, &end)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("0x%x + %d bytes runs past the end of the address space", address, bytes));
  }
  Fd fd(open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open /proc/self/maps to check the address (", strerror(errno),
                     "): use allreduce_mean with a tensor or array instead"));
  }
  std::optional<std::vector<Mapping>> parsed;
  for (uint64_t cursor = address; cursor < end;) {
    absl::StatusOr<std::optional<Mapping>> m = MappingAt(fd.get(), cursor, &use_ioctl, &parsed);
    if (!m.ok()) return m.status();
    auto where = [&] {
      return absl::StrFormat("byte %d of the %d at 0x%x (address 0x%x)", cursor - address, bytes,
                             address, cursor);
    };
    if (!m->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), " is not mapped in this process: not a valid data_ptr"));
    }
    const Mapping& map = **m;
    if (!map.readable || !map.writable) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s lies in a mapping [0x%x, 0x%x) that is %s: the exchange reads and writes it "
          "(device memory: use allreduce_mean_device)",
          where(), map.start, map.end,
          map.readable ? "read-only"
                       : (map.writable ? "write-only"
                                       : "neither readable nor "
                                         "writable")));
    }
    if (map.end <= cursor) return absl::InternalError("/proc/self/maps: a mapping ends before it");
    cursor = map.end;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckReadWritableRange(uintptr_t address, uint64_t bytes) {
  return Check(address, bytes, /*use_ioctl=*/true);
}

absl::Status CheckReadWritableRangeByParsing(uintptr_t address, uint64_t bytes) {
  return Check(address, bytes, /*use_ioctl=*/false);
}

}  // namespace python
}  // namespace gradwire
