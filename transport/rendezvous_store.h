// The key-value store ranks rendezvous through, scoped to one job.
//
// Wraps a Gloo store (a directory for one machine, Redis for many) so
// that:
//   - every key lives under "<job id>/" (gloo::rendezvous::PrefixStore):
//     jobs sharing a Redis server or directory never read each other's
//     addresses;
//   - every wait, including the ones Gloo issues inside connectFullMesh,
//     ends after this store's timeout: a rank that never arrives yields
//     "Wait timeout for key(s)" (DeadlineExceeded at our edge), not a hang.
// Scoped() derives a store for a sub-group or a re-created group under a
// longer prefix, sharing the connection.
#ifndef GRADWIRE_TRANSPORT_RENDEZVOUS_STORE_H_
#define GRADWIRE_TRANSPORT_RENDEZVOUS_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/timed_store.h"

namespace gradwire {
namespace transport {

class RendezvousStore : public TimedStore {
 public:
  // Opens the store `config` names (Redis if set, else its directory,
  // created if missing). Errors are clear and immediate for an unreachable
  // Redis, a wrong password, or an unusable directory.
  static absl::StatusOr<std::shared_ptr<RendezvousStore>> Open(const RendezvousConfig& config);

  // Wraps an already opened store (tests, custom stores).
  static std::shared_ptr<RendezvousStore> Wrap(std::shared_ptr<gloo::rendezvous::Store> base,
                                               const std::string& job_id, absl::Duration timeout);

  // The same store with keys under "<prefix>/<scope>/".
  std::shared_ptr<RendezvousStore> Scoped(const std::string& scope) const;

  const std::string& prefix() const { return prefix_; }
  absl::Duration timeout() const { return timeout_; }

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;

 private:
  RendezvousStore(std::shared_ptr<gloo::rendezvous::Store> base, std::string prefix,
                  absl::Duration timeout);
  // Both waits wait at most timeout(): Gloo passes its own (collective)
  // timeout here, but arriving at rendezvous may legitimately take longer
  // than one collective (ranks start at different times), so the store's
  // own deadline governs.
  void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds ignored) override;

  std::shared_ptr<gloo::rendezvous::Store> base_;
  const std::string prefix_;
  const absl::Duration timeout_;
  gloo::rendezvous::PrefixStore prefixed_;  // refers to *base_
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_RENDEZVOUS_STORE_H_
