// Joining a job from Python: the world group's rendezvous through a given
// store (torch.distributed's, or the environment's: rendezvous_config.h),
// then, before the communicator exists, the checks of
// lib/comm/rendezvous_checks.h (the same job secret, the same settings,
// with the caller's own settings added), then Communicator::Create.
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
#include "gradwire/lib/comm/rendezvous_checks.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace python {

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

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_JOIN_H_
