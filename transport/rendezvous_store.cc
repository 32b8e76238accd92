#include "gradwire/transport/rendezvous_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/file_store.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/redis_store.h"

namespace gradwire {
namespace transport {
namespace {

// mkdir -p; the directory may be shared by every rank, so EEXIST is fine.
absl::Status MakeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create rendezvous directory ", prefix, ": ", std::strerror(errno)));
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous path ", path, " is not a directory"));
  }
  return absl::OkStatus();
}

// Gloo's FileStore overshoots a wait's timeout by about a second
// (measured: 1000 ms asked, 2004 ms taken), which would break "a missing
// rank is reported within the store timeout". Poll its check() ourselves.
class DeadlineFileStore : public gloo::rendezvous::FileStore {
 public:
  using FileStore::FileStore;

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (!check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s): ", absl::StrJoin(keys, ", "), " after ",
                                timeout.count(), " ms (a rank never reached rendezvous?)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<RendezvousStore>> RendezvousStore::Open(
    const RendezvousConfig& config) {
  if (config.job_id.empty()) return absl::InvalidArgumentError("rendezvous needs a job id");
  const absl::Duration timeout =
      config.timeout > absl::ZeroDuration() ? config.timeout : RendezvousConfig::kDefaultTimeout;
  if (config.uses_redis()) {
    RedisStoreOptions options;
    options.host = config.redis_host;
    options.port = config.redis_port;
    options.password = config.redis_password;
    options.io_timeout = timeout;
    GRADWIRE_ASSIGN_OR_RETURN(std::unique_ptr<RedisStore> redis, RedisStore::Connect(options));
    return Wrap(std::shared_ptr<gloo::rendezvous::Store>(std::move(redis)), config.job_id, timeout);
  }
  if (config.store_dir.empty()) {
    return absl::InvalidArgumentError("rendezvous needs a Redis server or a directory");
  }
  GRADWIRE_RETURN_IF_ERROR(MakeDirectories(config.store_dir));
  std::shared_ptr<gloo::rendezvous::Store> file;
  GRADWIRE_RETURN_IF_ERROR(CallGloo(
      "opening file store", [&] { file = std::make_shared<DeadlineFileStore>(config.store_dir); }));
  return Wrap(std::move(file), config.job_id, timeout);
}

std::shared_ptr<RendezvousStore> RendezvousStore::Wrap(
    std::shared_ptr<gloo::rendezvous::Store> base, const std::string& job_id,
    absl::Duration timeout) {
  return std::shared_ptr<RendezvousStore>(new RendezvousStore(std::move(base), job_id, timeout));
}

RendezvousStore::RendezvousStore(std::shared_ptr<gloo::rendezvous::Store> base, std::string prefix,
                                 absl::Duration timeout)
    : TimedStore(GlooTimeout(timeout)),
      base_(std::move(base)),
      prefix_(std::move(prefix)),
      timeout_(timeout),
      prefixed_(prefix_, *base_) {}

std::shared_ptr<RendezvousStore> RendezvousStore::Scoped(const std::string& scope) const {
  return std::shared_ptr<RendezvousStore>(
      new RendezvousStore(base_, absl::StrCat(prefix_, "/", scope), timeout_));
}

void RendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  prefixed_.set(key, data);
}

std::vector<char> RendezvousStore::get(const std::string& key) {
  // Wait under our deadline first: some Gloo stores' get() waits with
  // their own 30 s default.
  wait({key});
  return prefixed_.get(key);
}

void RendezvousStore::WaitFor(const std::vector<std::string>& keys,
                              std::chrono::milliseconds /*ignored*/) {
  prefixed_.wait(keys, GlooTimeout(timeout_));
}

}  // namespace transport
}  // namespace gradwire
