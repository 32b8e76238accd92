#include "join.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/comm/rendezvous_checks.h"

namespace gradwire {
namespace python {
absl::StatusOr<std::unique_ptr<Communicator>> Join(
    std::shared_ptr<transport::RendezvousStore> store, const transport::RendezvousConfig& config,
    absl::string_view bind_address, absl::string_view settings, const JobSecret& secret,
    const CommunicatorOptions& options) {
  GRADWIRE_RETURN_IF_ERROR(options.compression.Validate());
  transport::GroupOptions group_options;
  group_options.bind_address = std::string(bind_address);
  group_options.timeout = config.timeout > absl::ZeroDuration()
                              ? config.timeout
                              : transport::RendezvousConfig::kDefaultTimeout;
  group_options.event_loop_nice = options.event_loop_nice;
  absl::StatusOr<std::unique_ptr<transport::GlooGroup>> world = transport::GlooGroup::Create(
      config.rank, config.world_size, store->Scoped("world"), group_options);
  if (!world.ok()) return world.status();
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(secret, config.job_id);
  if (!auth.ok()) return auth.status();
  GRADWIRE_RETURN_IF_ERROR(CheckSameSecret(**world, *auth));
  GRADWIRE_RETURN_IF_ERROR(
      CheckSameSettings(**world, absl::StrCat(Communicator::AgreedSettings(options), settings)));
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
      std::move(*world), config.node_id, config.local_world_size, std::move(*auth), options);
  if (!comm.ok()) return comm.status();
  if (options.hierarchical) GRADWIRE_RETURN_IF_ERROR((*comm)->Barrier());
  return comm;
}

}  // namespace python
}  // namespace gradwire
