// A Gloo rendezvous store on a Redis server that may require a password.
//
// Debian's gloo::rendezvous::RedisStore cannot authenticate (no AUTH) and
// its connect has no timeout, so a job behind a password-protected Redis
// (`requirepass`, the only access control Redis 7 offers without ACL
// files) could not rendezvous, and a dead server would hang it. This store
// speaks the same four operations over hiredis with:
//   - AUTH at connect, checked with a PING so a wrong or missing password
//     is reported at once, not as a later timeout;
//   - a timeout on connect and on every command (hiredis socket timeouts);
//   - polling waits bounded by the caller's timeout.
// Keys are written with SET NX: a key that already exists means another
// job used the same job id, which must fail loudly rather than hand out a
// stale peer address. Keys expire after `key_ttl` so crashed jobs do not
// leave litter forever.
//
// Gloo calls these methods and expects exceptions: they throw
// gloo::IoException ("Wait timeout ..." for deadlines). Connect() itself
// returns a Status.
#ifndef GRADWIRE_TRANSPORT_REDIS_STORE_H_
#define GRADWIRE_TRANSPORT_REDIS_STORE_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/transport/timed_store.h"

struct redisContext;

namespace gradwire {
namespace transport {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;                           // empty: no AUTH
  absl::Duration io_timeout = absl::Seconds(10);  // connect and each command
  absl::Duration key_ttl = absl::Hours(24);
};

class RedisStore : public TimedStore {
 public:
  // Connects, authenticates and pings. Errors: Unavailable (unreachable,
  // connect timeout), PermissionDenied (wrong or missing password).
  static absl::StatusOr<std::unique_ptr<RedisStore>> Connect(const RedisStoreOptions& options);

  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits (up to io_timeout) for the key, then returns its value.
  std::vector<char> get(const std::string& key) override;

 private:
  RedisStore(const RedisStoreOptions& options, redisContext* context);
  // Polls until every key exists; wait(keys) waits io_timeout.
  void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool AllExist(const std::vector<std::string>& keys);  // caller holds mu_

  const RedisStoreOptions options_;
  std::mutex mu_;  // hiredis contexts are not thread-safe
  redisContext* context_;
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_REDIS_STORE_H_
