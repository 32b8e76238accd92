// RemoteTier: the gRPC client of a data server (tools/data_server), used by
// the cache as its DataSource.
//
// Every attempt has its own deadline (call_timeout) and every read an
// overall one (read_timeout) covering its retries, so a dead or hung server
// costs a reader at most read_timeout, never a hang. Transient failures are
// retried with jittered exponential backoff (initial_backoff doubling to
// max_backoff) until read_timeout has passed (or max_attempts, if set):
//   UNAVAILABLE (no connection, server restarting or shedding connections),
//   DEADLINE_EXCEEDED (an attempt ran out of call_timeout),
//   RESOURCE_EXHAUSTED (the server is out of handler threads),
//   ABORTED, and DATA_LOSS in transit (bytes failing their checksum).
// Everything else fails at once: NOT_FOUND, UNAUTHENTICATED, version
// mismatches (FAILED_PRECONDITION), bad arguments, and DATA_LOSS reported by
// the server (its own copy is damaged: asking again would not help).
// The channel reconnects quickly (backoff capped at 1 s) so reads recover
// as soon as a restarted server listens again.
//
// Messages are capped at max_message_bytes in both directions (the server
// is told the cap, so its replies respect it); objects larger than that
// (whole shards) arrive as a stream of chunks. Samples are fetched many per
// call (GetBatch) because one 785-byte sample per round trip would leave a
// 20 ms link almost idle; a GetBatch of more than max_batch_keys keys is
// split into several calls.
//
// The job's token (token.h: surrounding whitespace stripped, printable
// ASCII) travels in metadata "x-gradwire-token"; Connect refuses a token
// that breaks the rules, and an empty one sends none. Without TLS it is
// visible on the wire; use it on a private network or behind a tunnel.
#ifndef GRADWIRE_LIB_CACHE_REMOTE_TIER_H_
#define GRADWIRE_LIB_CACHE_REMOTE_TIER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/lib/cache/data_source.h"

namespace gradwire {
namespace cache {

class RemoteTier : public DataSource {
 public:
  struct Options {
    std::string target;  // "host:port"
    std::string token;
    absl::Duration call_timeout = absl::Seconds(5);
    absl::Duration read_timeout = absl::Seconds(20);
    int max_attempts = 0;        // 0: as many as read_timeout allows
    int max_batch_keys = 16384;  // keys per GetBatch call (the server's default cap)
    absl::Duration initial_backoff = absl::Milliseconds(50);
    absl::Duration max_backoff = absl::Seconds(1);
    int max_message_bytes = 4 << 20;  // gRPC's own default receive cap
    uint32_t chunk_bytes = 1 << 20;
    // If non-zero, Connect fails unless the server serves this version.
    uint64_t expected_version = 0;
  };

  // Transfer counters since Connect.
  struct Counters {
    uint64_t calls = 0;
    uint64_t retries = 0;
    uint64_t failures = 0;  // reads that returned an error
    uint64_t bytes = 0;     // payload bytes received
  };

  // Connects and fetches the manifest (within read_timeout), pinning the
  // dataset version every later call names.
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Connect(const Options& options);
  ~RemoteTier() override;

  const Manifest& manifest() const override;
  absl::StatusOr<Blob> Get(absl::string_view key) override;
  std::vector<absl::StatusOr<Blob>> GetBatch(absl::Span<const std::string> keys) override;
  std::string Describe() const override { return "grpc://" + options_.target; }

  Counters counters() const;

 private:
  class Impl;
  explicit RemoteTier(Options options);

  const Options options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_REMOTE_TIER_H_
