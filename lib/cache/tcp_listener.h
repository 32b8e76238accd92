// TcpListener: the data server's own accept loop. It binds exactly the
// address it is given, accepts connections and hands each one to a handler
// (the data server gives them to gRPC through its external connection
// acceptor), and keeps accepting whatever a peer does.
//
// Why not gRPC's own listener: gRPC 1.51 gives up a listening socket for
// good on the first accept4 error other than EAGAIN/ECONNABORTED/EINTR. A
// flood of connections past the process's descriptor limit ("Failed
// accept4: Too many open files") ends all future connections, although the
// descriptors come back as soon as the flood ends; none of its server
// settings (handshake timeout, max idle, keepalive, stream or thread caps)
// changes that. And with SO_REUSEPORT and two completion queues it clones
// the socket of "host:0" onto a second, unannounced port.
//
// This loop:
//   * caps open connections (max_connections, by default the descriptor
//     limit less those open at Listen less a reserve of 32, at most 4096),
//     so accept never runs the process out of descriptors; a connection over the cap is
//     accepted and closed at once ("shed"), so its peer sees a clean close
//     and retries instead of waiting in the backlog;
//   * on EMFILE/ENFILE (descriptors taken elsewhere in the process) frees a
//     reserved descriptor to accept and shed the connection, then backs off;
//     on any other error backs off (1 ms doubling to max_backoff) and tries
//     again: no error ends accepting.
// Open connections are counted by tracking (descriptor, socket inode) of
// each connection handed out; one whose descriptor was closed (or reused
// for another file) no longer counts. Idle and half-open connections are
// closed by gRPC's timers (see DataServer::Options), which frees their slots.
#ifndef GRADWIRE_LIB_CACHE_TCP_LISTENER_H_
#define GRADWIRE_LIB_CACHE_TCP_LISTENER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gradwire {
namespace cache {

class TcpListener {
 public:
  struct Options {
    // "host:port", "[v6 host]:port" or ":port" (all interfaces). The host
    // is resolved and the first address bound, and only it; port 0 picks a
    // free port (see port()).
    std::string address = "127.0.0.1:0";
    // Open connections at most; 0 derives it from RLIMIT_NOFILE.
    int max_connections = 0;
    absl::Duration max_backoff = absl::Milliseconds(200);
  };

  struct Counters {
    uint64_t accepted = 0;       // handed to the handler
    uint64_t shed = 0;           // accepted and closed at once (over the cap or out of descriptors)
    uint64_t accept_errors = 0;  // accept4 failures (each followed by a back-off)
    uint64_t open = 0;           // connections handed out and still open, at the last count
  };

  // Receives each accepted connection (non-blocking, close-on-exec,
  // TCP_NODELAY) and owns it from then on.
  using Handler = std::function<void(int fd)>;

  // Binds and listens; accepting starts with Start.
  static absl::StatusOr<std::unique_ptr<TcpListener>> Listen(const Options& options);
  ~TcpListener();  // Stop()

  int port() const { return port_; }
  int fd() const { return listen_fd_; }
  int max_connections() const { return max_connections_; }

  void Start(Handler handler);
  // Stops accepting and closes the listening socket; connections already
  // handed out are the handler's. Idempotent.
  void Stop();

  Counters counters() const;

 private:
  struct Tracked {
    int fd;
    uint64_t inode;
  };

  TcpListener() = default;
  void Loop();
  // Drops tracked connections whose descriptor no longer holds their socket.
  void Sweep();
  void Shed(int fd);
  void BackOff(absl::Duration* backoff);

  Options options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: Stop wakes the loop
  int spare_fd_ = -1;  // reserved descriptor, given up to shed under EMFILE
  int port_ = 0;
  int max_connections_ = 0;
  Handler handler_;
  std::thread thread_;
  std::vector<Tracked> open_;  // loop thread only
  absl::Time last_sweep_ = absl::InfinitePast();
  std::atomic<uint64_t> accepted_{0}, shed_{0}, accept_errors_{0}, open_count_{0};
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_TCP_LISTENER_H_
