// Rendezvous configuration: environment conventions, strict parsing, and
// the "never advertise loopback in a multi-host job" guard.
#include "gradwire/transport/rendezvous_config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace gradwire {
namespace transport {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> Torchrun() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"},
          {"MASTER_ADDR", "10.0.0.1"},
          {"MASTER_PORT", "29500"},
          {"GRADWIRE_REDIS", "10.0.0.1:6380"}};
}

TEST(RendezvousConfig, ReadsTorchrunEnvironment) {
  auto c = ConfigFromEnvironment(RendezvousConfig(), Env(Torchrun()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 5);
  EXPECT_EQ(c->world_size, 8);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->local_world_size, 4);
  EXPECT_EQ(c->node_id, 1);
  EXPECT_EQ(c->redis_host, "10.0.0.1");
  EXPECT_EQ(c->redis_port, 6380);
  EXPECT_EQ(c->job_id, "10.0.0.1:29500");  // derived: unique per live job
  EXPECT_EQ(c->timeout, RendezvousConfig::kDefaultTimeout);
}

TEST(RendezvousConfig, ReadsMpirunEnvironment) {
  auto c = ConfigFromEnvironment(RendezvousConfig(), Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                          {"GRADWIRE_JOB_ID", "j"},
                                                          {"GRADWIRE_STORE_DIR", "/shared/rdv"},
                                                          {"GRADWIRE_TIMEOUT_MS", "1500"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->node_id, 1);  // rank / local_world_size
  EXPECT_EQ(c->store_dir, "/shared/rdv");
  EXPECT_EQ(c->timeout, absl::Milliseconds(1500));
}

TEST(RendezvousConfig, ExplicitValuesWinOverEnvironment) {
  RendezvousConfig explicit_values;
  explicit_values.rank = 2;
  explicit_values.job_id = "mine";
  auto c = ConfigFromEnvironment(explicit_values, Env(Torchrun()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->job_id, "mine");
}

TEST(RendezvousConfig, SingleMachineDefaultsNeedOnlyRankAndSize) {
  auto c = ConfigFromEnvironment(
      RendezvousConfig(), Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"GRADWIRE_JOB_ID", "j"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->local_world_size, 2);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_FALSE(c->store_dir.empty());
  EXPECT_FALSE(SpansHosts(*c));
}

TEST(RendezvousConfig, ReadsRedisPasswordFromFile) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
      "/redis_password";
  {
    std::ofstream out(path);
    out << "s3cret\n";
  }
  std::map<std::string, std::string> vars = Torchrun();
  vars["GRADWIRE_REDIS_PASSWORD_FILE"] = path;
  auto c = ConfigFromEnvironment(RendezvousConfig(), Env(vars));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redis_password, "s3cret");

  vars["GRADWIRE_REDIS_PASSWORD_FILE"] = path + ".missing";
  c = ConfigFromEnvironment(RendezvousConfig(), Env(vars));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cannot be read"), absl::string_view::npos) << c.status();
}

struct BadEnv {
  std::map<std::string, std::string> vars;
  const char* expected;  // substring of the error
};

TEST(RendezvousConfig, GarbageValuesGiveClearErrors) {
  const BadEnv cases[] = {
      {{{"RANK", "abc"}, {"WORLD_SIZE", "2"}}, "RANK='abc'"},
      {{{"RANK", ""}, {"WORLD_SIZE", "2"}}, "RANK=''"},
      {{{"RANK", "1x"}, {"WORLD_SIZE", "2"}}, "RANK='1x'"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK='-1'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE='0'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE"},
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"GRADWIRE_JOB_ID", "j"}}, "rank 4 is outside"},
      {{{"RANK", "0"}, {"GRADWIRE_JOB_ID", "j"}}, "world size unknown"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "2"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GRADWIRE_JOB_ID", "j"},
        {"GRADWIRE_STORE_DIR", "/x"}},
       "local rank 2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}},
       "MASTER_PORT='http'"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"GRADWIRE_JOB_ID", "j"},
        {"GRADWIRE_REDIS", "host:port"}},
       "GRADWIRE_REDIS='host:port'"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"GRADWIRE_JOB_ID", "j"},
        {"GRADWIRE_TIMEOUT_MS", "soon"}},
       "GRADWIRE_TIMEOUT_MS='soon'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "no job id"},
      // Two machines and no store anyone could share.
      {{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"GRADWIRE_JOB_ID", "j"}},
       "spans hosts"},
  };
  for (const BadEnv& bad : cases) {
    auto c = ConfigFromEnvironment(RendezvousConfig(), Env(bad.vars));
    ASSERT_FALSE(c.ok()) << bad.expected;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_NE(c.status().message().find(bad.expected), absl::string_view::npos)
        << c.status() << " should mention " << bad.expected;
  }
}

RendezvousConfig MultiHost() {
  RendezvousConfig c;
  c.rank = 0;
  c.world_size = 4;
  c.local_rank = 0;
  c.local_world_size = 2;
  c.node_id = 0;
  c.redis_host = "10.0.0.1";
  c.job_id = "j";
  c.timeout = absl::Seconds(1);
  return c;
}

TEST(ResolveBindAddress, SingleMachineUsesLoopback) {
  RendezvousConfig c = MultiHost();
  c.local_world_size = 4;
  c.redis_host = "127.0.0.1";
  ASSERT_FALSE(SpansHosts(c));
  auto a = ResolveBindAddress(c);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
}

TEST(ResolveBindAddress, RefusesLoopbackInterfaceInMultiHostJob) {
  RendezvousConfig c = MultiHost();
  c.iface = "lo";
  auto a = ResolveBindAddress(c);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("--iface"), absl::string_view::npos) << a.status();
}

TEST(ResolveBindAddress, RefusesLoopbackAddressWhenStoreIsRemote) {
  RendezvousConfig c = MultiHost();
  c.local_world_size = 4;        // one host's worth of ranks ...
  c.bind_address = "127.0.0.1";  // ... but the store is on another host
  ASSERT_TRUE(SpansHosts(c));
  auto a = ResolveBindAddress(c);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("loopback"), absl::string_view::npos) << a.status();
}

TEST(ResolveBindAddress, UsesExplicitAddressAndInterface) {
  RendezvousConfig c = MultiHost();
  c.bind_address = "10.9.8.7";
  auto a = ResolveBindAddress(c);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "10.9.8.7");

  RendezvousConfig single = MultiHost();
  single.local_world_size = 4;
  single.redis_host = "127.0.0.1";
  single.iface = "lo";
  a = ResolveBindAddress(single);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
}

TEST(ResolveBindAddress, UnknownInterfaceListsTheKnownOnes) {
  RendezvousConfig c = MultiHost();
  c.iface = "nosuchif0";
  auto a = ResolveBindAddress(c);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(a.status().message().find("lo"), absl::string_view::npos) << a.status();
}

TEST(ResolveBindAddress, InterfaceAndAddressTogetherIsAnError) {
  RendezvousConfig c = MultiHost();
  c.iface = "lo";
  c.bind_address = "10.0.0.2";
  EXPECT_EQ(ResolveBindAddress(c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IsLoopbackAddress, Classifies) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.1.1"));  // Debian's hostname entry
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("fe80::1"));
}

}  // namespace
}  // namespace transport
}  // namespace gradwire
