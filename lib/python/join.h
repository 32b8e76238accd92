// Joining a job from Python: the world group's rendezvous through a given
// store (torch.distributed's, or the environment's: rendezvous_config.h),
// then, before the communicator exists, two checks every rank makes
// together, so that a misconfigured rank fails the whole job at
// construction instead of at its first compressed step:
//   - the job secret: each rank signs a token with its FrameAuthenticator
//     (the secret and the job id) and verifies every rank's token; ranks
//     whose tokens verify for each other hold the same secret;
//   - the settings: the canonical spec, the hierarchy and dense rule, and
//     whatever the caller adds (the DDP hook's warm-up, momentum, ...),
//     gathered as text and compared.
// A mismatch is InvalidArgument "collective mismatch in <what> at
// rendezvous: ..." on every rank, naming the ranks on each side (the
// settings' values too; a secret never leaves its rank).
#ifndef GRADWIRE_LIB_PYTHON_JOIN_H_
#define GRADWIRE_LIB_PYTHON_JOIN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace python {

// The bucket id join tokens are signed with; no exchange may use it.
inline constexpr uint32_t kJoinBucket = 0xFFFFFFFFu;

// Rendezvous in `store` (already scoped to the job) as `config` says (rank,
// world size, node placement, job id naming the MAC's job, timeout: zero for
// the default), listening on `bind_address`; the two checks (`settings`:
// further "key=value;" text every rank must share), then
// Communicator::Create. On a hierarchical communicator a closing barrier
// makes sure every rank has read every key of the store, so the caller
// may delete the keys it set once this returns.
absl::StatusOr<std::unique_ptr<Communicator>> Join(
    std::shared_ptr<transport::RendezvousStore> store, const transport::RendezvousConfig& config,
    absl::string_view bind_address, absl::string_view settings, const JobSecret& secret,
    const CommunicatorOptions& options);

// The checks alone, on a connected group.
absl::Status CheckSameSecret(transport::GlooGroup& world, const FrameAuthenticator& auth);
absl::Status CheckSameSettings(transport::GlooGroup& world, const std::string& settings);

// The settings of `options` as CheckSameSettings compares them.
std::string AgreedSettings(const CommunicatorOptions& options);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_JOIN_H_
