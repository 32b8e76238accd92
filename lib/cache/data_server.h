// DataServer: serves a DataSource (normally a DirectorySource over a packed
// dataset) over gRPC's DataService (data_service.proto). The tools/
// data_server binary wraps it with flags; tests embed it directly.
//
// Every call must present the job's token (token.h); it is compared in
// constant time (CRYPTO_memcmp over SHA-256 digests, so neither content
// nor length leaks through timing). Requests pinned to another dataset
// version are refused with FAILED_PRECONDITION. Objects travel in chunks
// under the message cap. Errors name no key and no server path: a client
// learns NOT_FOUND ("no such object"), DATA_LOSS (the server's copy is
// damaged; the full error goes to this process's stderr) and the like.
//
// Connections: the server listens through its own TcpListener
// (tcp_listener.h), bound exactly to `address`, which survives connection
// floods past the descriptor limit that gRPC 1.51's listener does not, and
// caps open connections. gRPC's timers close what holds a slot without
// using it: connections that never finish the HTTP/2 handshake
// (handshake_timeout: a slowloris), idle ones (max_connection_idle) and
// dead peers with calls in progress (keepalive). A call beyond max_threads
// is refused with RESOURCE_EXHAUSTED, which RemoteTier retries.
#ifndef GRADWIRE_LIB_CACHE_DATA_SERVER_H_
#define GRADWIRE_LIB_CACHE_DATA_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/lib/cache/data_source.h"
#include "gradwire/lib/cache/tcp_listener.h"

namespace gradwire {
namespace cache {

class DataServer {
 public:
  struct Options {
    std::string address = "127.0.0.1:0";  // port 0: pick a free one, see port()
    std::string token;                    // required (token.h's rules)
    int max_message_bytes = 4 << 20;
    uint32_t default_chunk_bytes = 1 << 20;
    int max_batch_keys = 16384;
    // Added before each call's first reply: emulates a distant store where
    // the kernel cannot (no sch_netem), for benchmarks. Zero in production.
    absl::Duration response_delay = absl::ZeroDuration();

    // Open connections at most; 0: from RLIMIT_NOFILE (tcp_listener.h).
    int max_connections = 0;
    // TCP connected but no HTTP/2 settings received within: closed.
    absl::Duration handshake_timeout = absl::Seconds(10);
    // No call in progress for this long: closed (the client reconnects).
    absl::Duration max_connection_idle = absl::Minutes(2);
    // With calls in progress, the peer is pinged after this long without
    // traffic and the connection closed if it does not answer in time.
    absl::Duration keepalive_time = absl::Minutes(1);
    absl::Duration keepalive_timeout = absl::Seconds(20);
    int max_concurrent_streams = 256;  // calls in progress per connection
    int max_threads = 256;             // handler threads in all
  };

  // What the server did since Start.
  struct Stats {
    uint64_t calls = 0;            // calls that passed the token check
    uint64_t unauthenticated = 0;  // calls refused for their token
    uint64_t objects = 0;          // objects served (one per Get, one per key found in a batch)
    uint64_t bytes = 0;            // their payload bytes
    uint64_t not_found = 0;        // keys asked for that do not exist
    uint64_t source_errors = 0;    // other failures reading the source (logged to stderr)
    TcpListener::Counters connections;
  };

  static absl::StatusOr<std::unique_ptr<DataServer>> Start(std::shared_ptr<DataSource> source,
                                                           const Options& options);
  ~DataServer();  // Shutdown(1 s) if still running

  int port() const { return port_; }
  Stats stats() const;

  // Stops accepting calls; calls still running after `grace` are cancelled.
  void Shutdown(absl::Duration grace);

  // Blocks until Shutdown has been called (from another thread).
  void Wait();

 private:
  class Service;
  DataServer();

  std::unique_ptr<Service> service_;
  std::unique_ptr<class grpc_server_holder> server_;
  int port_ = 0;
};

// True iff the two tokens are equal, in time independent of their content.
bool TokensEqual(absl::string_view a, absl::string_view b);

// "served 7 objects (5.5 kB) in 3 calls; ..." for logs.
std::string FormatServerStats(const DataServer::Stats& stats);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DATA_SERVER_H_
