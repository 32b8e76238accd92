#include "gradwire/transport/rendezvous_config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace transport {
namespace {

// Reads an integer variable strictly: "", "3x", "1e3" and out-of-range
// values are errors naming the variable (a typo must not become rank 0).
absl::Status ReadInt(const EnvLookup& env, const std::string& name, int min_value, int* out,
                     bool* found) {
  *found = false;
  std::optional<std::string> value = env(name);
  if (!value.has_value()) return absl::OkStatus();
  int parsed = 0;
  absl::string_view text = absl::StripAsciiWhitespace(*value);
  if (text.empty() || !absl::SimpleAtoi(text, &parsed) || parsed < min_value) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "='", *value,
                                                   "' is not an integer >= ", min_value));
  }
  *out = parsed;
  *found = true;
  return absl::OkStatus();
}

// Fills `*field` (if still unset, i.e. negative) from the first of `names`
// that is set.
absl::Status FillInt(const EnvLookup& env, std::initializer_list<const char*> names, int min_value,
                     int* field) {
  if (*field >= 0) return absl::OkStatus();
  for (const char* name : names) {
    bool found = false;
    int value = 0;
    GRADWIRE_RETURN_IF_ERROR(ReadInt(env, name, min_value, &value, &found));
    if (found) {
      *field = value;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

void FillString(const EnvLookup& env, std::initializer_list<const char*> names,
                std::string* field) {
  if (!field->empty()) return;
  for (const char* name : names) {
    std::optional<std::string> value = env(name);
    if (value.has_value() && !value->empty()) {
      *field = *value;
      return;
    }
  }
}

absl::Status ParseHostPort(const std::string& variable, const std::string& text, std::string* host,
                           int* port) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  int parsed_port = 6379;
  if (parts[0].empty() || (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &parsed_port) ||
                                                 parsed_port <= 0 || parsed_port > 65535))) {
    return absl::InvalidArgumentError(
        absl::StrCat(variable, "='", text, "' is not host[:port] with port in 1..65535"));
  }
  *host = parts[0];
  *port = parsed_port;
  return absl::OkStatus();
}

// Numeric form of a sockaddr ("10.0.0.5", "fe80::1").
std::string NumericHost(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(addr, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return host;
}

absl::StatusOr<std::string> AddressOfInterface(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return absl::UnavailableError(absl::StrCat("getifaddrs failed: errno ", errno));
  }
  std::string v4, v6;
  std::set<std::string> names;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    names.insert(it->ifa_name);
    if (iface != it->ifa_name) continue;
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (family == AF_INET && v4.empty()) v4 = NumericHost(it->ifa_addr, len);
    // Link-local IPv6 needs a scope id Gloo does not carry: skip it.
    if (family == AF_INET6 && v6.empty() &&
        !IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr)) {
      v6 = NumericHost(it->ifa_addr, len);
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  return absl::NotFoundError(absl::StrCat(
      "network interface '", iface,
      "' has no usable IP address; interfaces with one: ", absl::StrJoin(names, ", ")));
}

// All addresses `host` resolves to, numeric, in resolver order.
absl::StatusOr<std::vector<std::string>> Resolve(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (addrinfo* it = result; it != nullptr; it = it->ai_next) {
    std::string numeric = NumericHost(it->ai_addr, it->ai_addrlen);
    if (!numeric.empty()) out.push_back(numeric);
  }
  freeaddrinfo(result);
  if (out.empty()) return absl::NotFoundError(absl::StrCat("'", host, "' has no address"));
  return out;
}

// The whole file minus trailing newlines (what `echo pw > file` leaves).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("GRADWIRE_REDIS_PASSWORD_FILE='", path,
                                                   "' cannot be read: ", std::strerror(errno)));
  }
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GRADWIRE_REDIS_PASSWORD_FILE='", path, "' is empty"));
  }
  return secret;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

bool IsLoopbackAddress(absl::string_view address) {
  in_addr v4;
  in6_addr v6;
  const std::string text(address);
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return address == "localhost";
}

bool SpansHosts(const RendezvousConfig& c) {
  if (c.world_size > 0 && c.local_world_size > 0 && c.world_size > c.local_world_size) {
    return true;
  }
  // A Redis store elsewhere means peers elsewhere: why else use one?
  if (c.uses_redis()) {
    absl::StatusOr<std::vector<std::string>> addrs = Resolve(c.redis_host);
    if (addrs.ok() && !IsLoopbackAddress(addrs->front())) return true;
  }
  return false;
}

absl::Status Validate(const RendezvousConfig& c) {
  if (c.world_size <= 0) {
    return absl::InvalidArgumentError(
        "world size unknown: set WORLD_SIZE (torchrun), run under mpirun, or pass it explicitly");
  }
  if (c.rank < 0 || c.rank >= c.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", c.rank, " is outside [0, ", c.world_size, "): set RANK or pass it explicitly"));
  }
  if (c.local_world_size <= 0 || c.local_world_size > c.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("local world size ", c.local_world_size,
                                                   " is outside [1, ", c.world_size, "]"));
  }
  if (c.local_rank < 0 || c.local_rank >= c.local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("local rank ", c.local_rank, " is outside [0, ", c.local_world_size, ")"));
  }
  if (c.node_id < 0 || c.node_id >= c.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id ", c.node_id, " is outside [0, ", c.world_size, ")"));
  }
  if (!c.iface.empty() && !c.bind_address.empty()) {
    return absl::InvalidArgumentError("pass either an interface or a bind address, not both");
  }
  if (c.uses_redis() == !c.store_dir.empty()) {
    return absl::InvalidArgumentError(
        "exactly one rendezvous store is needed: a Redis server or a shared directory");
  }
  if (c.redis_port <= 0 || c.redis_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad Redis port ", c.redis_port));
  }
  if (c.job_id.empty()) {
    return absl::InvalidArgumentError(
        "no job id: set GRADWIRE_JOB_ID (or MASTER_ADDR/MASTER_PORT, TORCHELASTIC_RUN_ID) so "
        "jobs sharing a store do not collide");
  }
  if (c.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<RendezvousConfig> ConfigFromEnvironment(RendezvousConfig c, const EnvLookup& env) {
  GRADWIRE_RETURN_IF_ERROR(FillInt(env, {"RANK", "OMPI_COMM_WORLD_RANK"}, 0, &c.rank));
  GRADWIRE_RETURN_IF_ERROR(FillInt(env, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}, 1, &c.world_size));
  GRADWIRE_RETURN_IF_ERROR(
      FillInt(env, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0, &c.local_rank));
  GRADWIRE_RETURN_IF_ERROR(
      FillInt(env, {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1, &c.local_world_size));
  GRADWIRE_RETURN_IF_ERROR(FillInt(env, {"GROUP_RANK"}, 0, &c.node_id));
  // Without local information assume one machine: every rank is local.
  if (c.local_world_size < 0 && c.world_size > 0) c.local_world_size = c.world_size;
  if (c.local_rank < 0 && c.rank >= 0 && c.local_world_size > 0) {
    c.local_rank = c.rank % c.local_world_size;
  }
  if (c.node_id < 0 && c.rank >= 0 && c.local_world_size > 0) {
    c.node_id = c.rank / c.local_world_size;
  }

  FillString(env, {"GRADWIRE_IFACE", "GLOO_SOCKET_IFNAME"}, &c.iface);
  FillString(env, {"GRADWIRE_BIND_ADDRESS"}, &c.bind_address);
  if (c.redis_host.empty()) {
    std::optional<std::string> redis = env("GRADWIRE_REDIS");
    if (redis.has_value() && !redis->empty()) {
      GRADWIRE_RETURN_IF_ERROR(
          ParseHostPort("GRADWIRE_REDIS", *redis, &c.redis_host, &c.redis_port));
    }
  }
  FillString(env, {"GRADWIRE_REDIS_PASSWORD"}, &c.redis_password);
  if (c.redis_password.empty()) {
    std::optional<std::string> file = env("GRADWIRE_REDIS_PASSWORD_FILE");
    if (file.has_value() && !file->empty()) {
      GRADWIRE_ASSIGN_OR_RETURN(c.redis_password, ReadSecretFile(*file));
    }
  }
  FillString(env, {"GRADWIRE_STORE_DIR"}, &c.store_dir);
  FillString(env, {"GRADWIRE_JOB_ID", "TORCHELASTIC_RUN_ID"}, &c.job_id);
  if (c.job_id.empty()) {
    // torchrun and most launchers set these; a port is unique per live job
    // on the master host.
    std::optional<std::string> addr = env("MASTER_ADDR");
    std::optional<std::string> port = env("MASTER_PORT");
    if (addr.has_value() && port.has_value()) {
      int parsed = 0;
      if (!absl::SimpleAtoi(*port, &parsed) || parsed <= 0 || parsed > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat("environment variable MASTER_PORT='", *port, "' is not a port"));
      }
      c.job_id = absl::StrCat(*addr, ":", parsed);
    }
  }
  if (c.timeout == absl::ZeroDuration()) {
    int ms = -1;
    GRADWIRE_RETURN_IF_ERROR(FillInt(env, {"GRADWIRE_TIMEOUT_MS"}, 1, &ms));
    c.timeout = ms > 0 ? absl::Milliseconds(ms) : RendezvousConfig::kDefaultTimeout;
  }
  if (!c.uses_redis() && c.store_dir.empty()) {
    if (SpansHosts(c)) {
      return absl::InvalidArgumentError(
          "this job spans hosts but has no rendezvous store: pass a Redis server "
          "(GRADWIRE_REDIS=host:port) or a directory all hosts share (GRADWIRE_STORE_DIR)");
    }
    c.store_dir = "/tmp/gradwire-rendezvous";
  }
  GRADWIRE_RETURN_IF_ERROR(Validate(c));
  return c;
}

absl::StatusOr<std::string> ResolveBindAddress(const RendezvousConfig& c) {
  const bool spans_hosts = SpansHosts(c);
  std::string address;
  std::string source;
  if (!c.iface.empty() && !c.bind_address.empty()) {
    return absl::InvalidArgumentError("pass either an interface or a bind address, not both");
  }
  if (!c.iface.empty()) {
    GRADWIRE_ASSIGN_OR_RETURN(address, AddressOfInterface(c.iface));
    source = absl::StrCat("interface ", c.iface);
  } else if (!c.bind_address.empty()) {
    GRADWIRE_ASSIGN_OR_RETURN(std::vector<std::string> addresses, Resolve(c.bind_address));
    address = addresses.front();
    source = absl::StrCat("bind address ", c.bind_address);
  } else if (!spans_hosts) {
    // One machine: loopback is right and needs no interface.
    return std::string("127.0.0.1");
  } else {
    char hostname[256] = {};
    if (gethostname(hostname, sizeof(hostname) - 1) != 0) {
      return absl::UnavailableError("gethostname failed; pass --iface");
    }
    GRADWIRE_ASSIGN_OR_RETURN(std::vector<std::string> addresses, Resolve(hostname));
    address = addresses.front();
    for (const std::string& candidate : addresses) {
      if (!IsLoopbackAddress(candidate)) {
        address = candidate;
        break;
      }
    }
    source = absl::StrCat("hostname ", hostname);
  }
  if (spans_hosts && IsLoopbackAddress(address)) {
    return absl::FailedPreconditionError(absl::StrCat(
        source, " resolves to loopback address ", address,
        " but this job spans hosts, so peers could not reach it; pass --iface=<name> (like "
        "GLOO_SOCKET_IFNAME) or --bind_address=<routable address>"));
  }
  return address;
}

}  // namespace transport
}  // namespace gradwire
