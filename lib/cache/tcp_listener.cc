#include "gradwire/lib/cache/tcp_listener.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {
namespace {

// Descriptors kept free for everything else in the process when the cap
// is derived from RLIMIT_NOFILE.
constexpr int kReserveDescriptors = 32;
// The derived cap never exceeds this: each connection also costs gRPC
// memory, and a job's readers need far fewer.
constexpr int kMaxDerivedConnections = 4096;
constexpr int kBacklog = 1024;
// At the cap, closed connections are looked for at most this often;
// connections arriving in between are shed.
constexpr absl::Duration kSweepInterval = absl::Milliseconds(20);
// Connections accepted per wake-up before polling again (stop stays prompt).
constexpr int kAcceptsPerWake = 64;
constexpr int kOne = 1;

absl::Status SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  size_t colon;
  if (!address.empty() && address[0] == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address '", address, "': expected [v6 address]:port"));
    }
    *host = address.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == std::string::npos || address.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat(
          "listen address '", address, "': expected host:port ([v6 address]:port for IPv6)"));
    }
    *host = address.substr(0, colon);
  }
  *port = address.substr(colon + 1);
  // Decimal 0..65535 (0: any free port). getaddrinfo takes larger numbers
  // modulo 2^16 (99999 listened on 34463), so the range is checked here.
  if (port->empty() || port->size() > 5 ||
      port->find_first_not_of("0123456789") != std::string::npos || std::stoul(*port) > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", address, "': bad port (want 0..65535)"));
  }
  return absl::OkStatus();
}

int CountOpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (struct dirent* d = readdir(dir)) n += d->d_name[0] != '.';
  closedir(dir);
  return n - 1;  // the listing's own descriptor
}

int DerivedMaxConnections() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  const rlim_t soft = limit.rlim_cur;
  const int open = std::max(CountOpenDescriptors(), 16);
  const rlim_t free = soft - std::min<rlim_t>(soft, open + kReserveDescriptors);
  return static_cast<int>(std::clamp<rlim_t>(free, 1, kMaxDerivedConnections));
}

// The inode of the socket open at `fd`; 0 if `fd` holds no socket.
uint64_t SocketInode(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Listen(const Options& options) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(options.address, &host, &port); !s.ok()) return s;
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options.address, "': ", gai_strerror(rc)));
  }
  std::unique_ptr<TcpListener> l(new TcpListener());
  l->options_ = options;
  auto fail = [&](const char* what) {
    absl::Status s = ErrnoToStatus(absl::StrCat("listen on ", options.address, ": ", what), errno);
    freeaddrinfo(found);
    return s;
  };
  l->listen_fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->listen_fd_ < 0) return fail("socket");
  const int one = 1;
  // SO_REUSEADDR (restart on the port while old connections linger), never
  // SO_REUSEPORT (which would let another process listen on it too).
  setsockopt(l->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(l->listen_fd_, found->ai_addr, found->ai_addrlen) != 0) return fail("bind");
  if (listen(l->listen_fd_, kBacklog) != 0) return fail("listen");
  freeaddrinfo(found);
  struct sockaddr_storage bound = {};
  socklen_t len = sizeof(bound);
  if (getsockname(l->listen_fd_, reinterpret_cast<struct sockaddr*>(&bound), &len) != 0) {
    return ErrnoToStatus("listen: getsockname", errno);
  }
  l->port_ =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<struct sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<struct sockaddr_in*>(&bound)->sin_port);
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  l->spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (l->wake_fd_ < 0 || l->spare_fd_ < 0) return ErrnoToStatus("listen: eventfd/open", errno);
  l->max_connections_ =
      options.max_connections > 0 ? options.max_connections : DerivedMaxConnections();
  return l;
}

TcpListener::~TcpListener() {
  Stop();
  for (int fd : {listen_fd_, wake_fd_, spare_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void TcpListener::Start(Handler handler) {
  handler_ = std::move(handler);
  thread_ = std::thread([this] { Loop(); });
}

void TcpListener::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
  thread_.join();
  close(listen_fd_);  // no more connections queue for a loop that is gone
  listen_fd_ = -1;
}

TcpListener::Counters TcpListener::counters() const {
  Counters c;
  c.accepted = accepted_.load(std::memory_order_relaxed);
  c.shed = shed_.load(std::memory_order_relaxed);
  c.accept_errors = accept_errors_.load(std::memory_order_relaxed);
  c.open = open_count_.load(std::memory_order_relaxed);
  return c;
}

void TcpListener::Sweep() {
  open_.erase(std::remove_if(open_.begin(), open_.end(),
                             [](const Tracked& t) { return SocketInode(t.fd) != t.inode; }),
              open_.end());
  open_count_.store(open_.size(), std::memory_order_relaxed);
  last_sweep_ = absl::Now();
}

void TcpListener::Shed(int fd) {
  close(fd);
  shed_.fetch_add(1, std::memory_order_relaxed);
}

void TcpListener::BackOff(absl::Duration* backoff) {
  struct pollfd wake = {wake_fd_, POLLIN, 0};
  poll(&wake, 1, static_cast<int>(absl::ToInt64Milliseconds(*backoff)) + 1);
  *backoff = std::min(*backoff * 2, options_.max_backoff);
}

void TcpListener::Loop() {
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    struct pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    // Wakes once a second while connections are open, to count them.
    int ready = poll(fds, 2, open_.empty() ? -1 : 1000);
    if (fds[1].revents != 0) return;
    if (ready == 0) Sweep();
    if ((fds[0].revents & POLLIN) == 0) continue;
    for (int n = 0; n < kAcceptsPerWake; ++n) {
      if (open_.size() >= static_cast<size_t>(max_connections_) &&
          absl::Now() - last_sweep_ >= kSweepInterval) {
        Sweep();
      }
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EINTR || err == ECONNABORTED) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) break;
        accept_errors_.fetch_add(1, std::memory_order_relaxed);
        if ((err == EMFILE || err == ENFILE) && spare_fd_ >= 0) {
          // Out of descriptors: nothing queued can be served now. Give up
          // the spare to take the queued connections off one by one and
          // close them, so their peers retry instead of hanging.
          close(spare_fd_);
          for (int k = 0; k < kAcceptsPerWake; ++k) {
            int shed = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (shed < 0) break;
            Shed(shed);
          }
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        BackOff(&backoff);
        break;
      }
      backoff = absl::Milliseconds(1);
      if (open_.size() >= static_cast<size_t>(max_connections_)) {
        Shed(fd);
        continue;
      }
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &kOne, sizeof(kOne));
      open_.push_back({fd, SocketInode(fd)});
      open_count_.store(open_.size(), std::memory_order_relaxed);
      accepted_.fetch_add(1, std::memory_order_relaxed);
      handler_(fd);
    }
  }
}

}  // namespace cache
}  // namespace gradwire
