#include "gradwire/transport/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"

namespace gradwire {
namespace transport {
namespace {

// Owns one reply; hiredis hands out malloc'ed trees.
struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string ContextError(redisContext* c) {
  if (c == nullptr) return "out of memory";
  // hiredis reports a socket timeout as EAGAIN; say "timeout" so callers
  // (and our exception mapping) see a deadline, not a lost server.
  if (c->err == REDIS_ERR_IO && absl::StrContains(c->errstr, "temporarily unavailable")) {
    return "timeout waiting for the Redis server's reply";
  }
  return absl::StrCat(c->errstr, " (code ", c->err, ")");
}

// A command that got no reply: a socket timeout (hiredis reports EAGAIN)
// means the server is alive but stalled, anything else that it is gone.
absl::Status CommandFailed(redisContext* c, const std::string& what, absl::Duration timeout) {
  if (c != nullptr && c->err == REDIS_ERR_IO &&
      (absl::StrContains(c->errstr, "temporarily unavailable") ||
       absl::StrContains(c->errstr, "timed out"))) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": no reply within ", absl::FormatDuration(timeout), " (server stalled?)"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", ContextError(c)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Connect(const RedisStoreOptions& o) {
  const std::string where = absl::StrCat("Redis at ", o.host, ":", o.port);
  redisContext* c = redisConnectWithTimeout(o.host.c_str(), o.port, absl::ToTimeval(o.io_timeout));
  if (c == nullptr || c->err != 0) {
    const std::string error = ContextError(c);
    if (c != nullptr) redisFree(c);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", error));
  }
  if (redisSetTimeout(c, absl::ToTimeval(o.io_timeout)) != REDIS_OK) {
    redisFree(c);
    return absl::InternalError(absl::StrCat("cannot set timeouts for ", where));
  }
  std::unique_ptr<RedisStore> store(new RedisStore(o, c));
  if (!o.password.empty()) {
    Reply r(
        static_cast<redisReply*>(redisCommand(c, "AUTH %b", o.password.data(), o.password.size())));
    if (r == nullptr) {
      return CommandFailed(c, absl::StrCat("AUTH to ", where), o.io_timeout);
    }
    if (r->type == REDIS_REPLY_ERROR) {
      // Never echo the password; Redis's own message is safe to show.
      return absl::PermissionDeniedError(absl::StrCat("Redis authentication failed at ", where,
                                                      ": ", r->str,
                                                      " (check the job's Redis password)"));
    }
  }
  Reply pong(static_cast<redisReply*>(redisCommand(c, "PING")));
  if (pong == nullptr) {
    return CommandFailed(c, absl::StrCat("PING to ", where), o.io_timeout);
  }
  if (pong->type == REDIS_REPLY_ERROR) {
    const bool noauth = absl::StartsWith(pong->str, "NOAUTH");
    return noauth ? absl::PermissionDeniedError(absl::StrCat(
                        where, " requires a password (requirepass) and none was given"))
                  : absl::UnavailableError(absl::StrCat(where, " refused PING: ", pong->str));
  }
  return store;
}

RedisStore::RedisStore(const RedisStoreOptions& options, redisContext* context)
    : TimedStore(std::chrono::milliseconds(absl::ToInt64Milliseconds(options.io_timeout))),
      options_(options),
      context_(context) {}

RedisStore::~RedisStore() { redisFree(context_); }

void RedisStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard<std::mutex> lock(mu_);
  const long long ttl = std::max<long long>(1, absl::ToInt64Seconds(options_.key_ttl));
  Reply r(static_cast<redisReply*>(redisCommand(context_, "SET %b %b NX EX %lld", key.data(),
                                                key.size(), data.data(), data.size(), ttl)));
  if (r == nullptr) {
    GLOO_THROW_IO_EXCEPTION("Redis SET ", key, " failed: ", ContextError(context_));
  }
  if (r->type == REDIS_REPLY_ERROR) {
    GLOO_THROW_IO_EXCEPTION("Redis SET ", key, " failed: ", r->str);
  }
  if (r->type == REDIS_REPLY_NIL) {
    GLOO_THROW_IO_EXCEPTION("Redis key ", key,
                            " already exists: another job used this job id; pick a fresh one");
  }
}

bool RedisStore::AllExist(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    Reply r(static_cast<redisReply*>(redisCommand(context_, "EXISTS %b", key.data(), key.size())));
    if (r == nullptr) {
      GLOO_THROW_IO_EXCEPTION("Redis EXISTS ", key, " failed: ", ContextError(context_));
    }
    if (r->type == REDIS_REPLY_ERROR) {
      GLOO_THROW_IO_EXCEPTION("Redis EXISTS ", key, " failed: ", r->str);
    }
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) return false;
  }
  return true;
}

void RedisStore::WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Poll: Redis has no "wait for key" short of keyspace notifications,
  // which need server configuration. Back off from 1 ms to 50 ms so a
  // rendezvous of many ranks does not hammer the server.
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (AllExist(keys)) return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s): ", absl::StrJoin(keys, ", "), " after ",
                              timeout.count(), " ms (a rank never reached rendezvous?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::vector<char> RedisStore::get(const std::string& key) {
  wait({key});
  std::lock_guard<std::mutex> lock(mu_);
  Reply r(static_cast<redisReply*>(redisCommand(context_, "GET %b", key.data(), key.size())));
  if (r == nullptr) {
    GLOO_THROW_IO_EXCEPTION("Redis GET ", key, " failed: ", ContextError(context_));
  }
  if (r->type != REDIS_REPLY_STRING) {
    GLOO_THROW_IO_EXCEPTION("Redis GET ", key, " returned no value (expired?)");
  }
  return std::vector<char>(r->str, r->str + r->len);
}

}  // namespace transport
}  // namespace gradwire
