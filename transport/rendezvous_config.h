// Where this process sits in a job, and how ranks find each other.
//
// Filled from the conventions launchers already use, so a training stack
// started by torchrun or mpirun needs no extra configuration:
//   torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
//             MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID
//   mpirun:   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   gradwire: GRADWIRE_IFACE, GRADWIRE_BIND_ADDRESS, GRADWIRE_JOB_ID,
//             GRADWIRE_STORE_DIR, GRADWIRE_REDIS (host:port),
//             GRADWIRE_REDIS_PASSWORD or GRADWIRE_REDIS_PASSWORD_FILE (a
//             file keeps the secret out of /proc/<pid>/environ and logs),
//             GRADWIRE_TIMEOUT_MS
// Values already set in the struct (by a tool's flags) win over the
// environment; torchrun variables win over mpirun ones.
//
// transport/ defines no flags: tools/ parse flags into this struct.
#ifndef GRADWIRE_TRANSPORT_RENDEZVOUS_CONFIG_H_
#define GRADWIRE_TRANSPORT_RENDEZVOUS_CONFIG_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gradwire {
namespace transport {

struct RendezvousConfig {
  // -1 means "not set yet".
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  int local_world_size = -1;
  // Which machine this rank is on; ranks with the same node_id form the
  // intra-node group of the hierarchical exchange. Defaults to
  // rank / local_world_size (torchrun and mpirun place ranks by node).
  int node_id = -1;

  // Network: an interface name (like GLOO_SOCKET_IFNAME) or a literal
  // address/hostname to listen on and advertise. At most one.
  std::string iface;
  std::string bind_address;

  // Store: a Redis server ("host", port, optional requirepass password)
  // for multi-host jobs, else a directory every rank can see.
  std::string redis_host;
  int redis_port = 6379;
  std::string redis_password;
  std::string store_dir;

  // Namespaces every store key so jobs sharing a store never collide.
  std::string job_id;

  // Deadline for every wait: store waits and collectives.
  absl::Duration timeout = absl::ZeroDuration();  // zero: kDefaultTimeout
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(30);

  bool uses_redis() const { return !redis_host.empty(); }
};

// Looks up an environment variable; nullopt when unset. Injectable so
// tests need not mutate the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnvironment();

// Completes `explicit_values` from the environment and validates the
// result (see Validate). Errors name the variable and the bad value.
absl::StatusOr<RendezvousConfig> ConfigFromEnvironment(RendezvousConfig explicit_values,
                                                       const EnvLookup& env = ProcessEnvironment());

// Checks ranges and consistency: 0 <= rank < world_size, local ranks,
// node ids, exactly one store, a job id.
absl::Status Validate(const RendezvousConfig& config);

// True when the job cannot be confined to this machine: more ranks than
// local ranks, or a store on another host.
bool SpansHosts(const RendezvousConfig& config);

// The numeric address this rank listens on and advertises to peers.
// Never a loopback address when the job spans hosts: that is the classic
// "hostname resolves to 127.0.1.1" failure, where every peer would dial
// itself; the error tells the user to pass --iface instead.
absl::StatusOr<std::string> ResolveBindAddress(const RendezvousConfig& config);

// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
bool IsLoopbackAddress(absl::string_view numeric_address);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_RENDEZVOUS_CONFIG_H_
