// DataServer: serves a DataSource (normally a DirectorySource over a packed
// dataset) over gRPC's DataService (data_service.proto). The tools/
// data_server binary wraps it with flags; tests embed it directly.
//
// Every call must present the job's token; it is compared in constant time
// (CRYPTO_memcmp over SHA-256 digests, so neither content nor length leaks
// through timing). Requests pinned to another dataset version are refused
// with FAILED_PRECONDITION. Objects travel in chunks under the message cap.
#ifndef GRADWIRE_LIB_CACHE_DATA_SERVER_H_
#define GRADWIRE_LIB_CACHE_DATA_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/lib/cache/data_source.h"

namespace gradwire {
namespace cache {

class DataServer {
 public:
  struct Options {
    std::string address = "127.0.0.1:0";  // port 0: pick a free one, see port()
    std::string token;                    // required, non-empty
    int max_message_bytes = 4 << 20;
    uint32_t default_chunk_bytes = 1 << 20;
    int max_batch_keys = 16384;
    // Added before each call's first reply: emulates a distant store where
    // the kernel cannot (no sch_netem), for benchmarks. Zero in production.
    absl::Duration response_delay = absl::ZeroDuration();
  };

  static absl::StatusOr<std::unique_ptr<DataServer>> Start(std::shared_ptr<DataSource> source,
                                                           const Options& options);
  ~DataServer();  // Shutdown(1 s) if still running

  int port() const { return port_; }

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

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DATA_SERVER_H_
