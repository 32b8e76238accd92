// The data server and its client under hostile and unlucky conditions:
// where the server listens, connection floods past its descriptor limit
// and a slowloris, what its errors reveal, tokens with stray bytes,
// fetches larger than a batch, and which failures are retried for how long.
#include "gradwire/lib/cache/data_server.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/data_cache.h"
#include "gradwire/lib/cache/data_service.grpc.pb.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/remote_tier.h"
#include "gradwire/lib/cache/token.h"
#include "gradwire/tests/cache/server_process.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

std::unique_ptr<DataServer> StartServer(const std::string& dir, DataServer::Options o = {}) {
  auto source = DirectorySource::Open(dir);
  EXPECT_TRUE(source.ok()) << source.status();
  if (o.token.empty()) o.token = testing::kToken;
  auto server = DataServer::Start(std::shared_ptr<DataSource>(std::move(*source)), o);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

RemoteTier::Options ClientOptions(int port) {
  RemoteTier::Options o;
  o.target = absl::StrCat("127.0.0.1:", port);
  o.token = testing::kToken;
  return o;
}

// Local addresses ("0100007F:1F90", /proc/net/tcp's hex) of the TCP
// sockets this process listens on.
std::vector<std::string> ListeningSockets() {
  std::set<std::string> inodes;
  for (int fd = 0; fd < 4096; ++fd) {
    char link[64];
    ssize_t n = readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), link, sizeof(link) - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    absl::string_view target(link);
    if (absl::ConsumePrefix(&target, "socket:[") && absl::ConsumeSuffix(&target, "]")) {
      inodes.insert(std::string(target));
    }
  }
  std::vector<std::string> out;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() > 9 && f[3] == "0A" && inodes.count(f[9]) > 0) out.push_back(f[1]);
    }
  }
  return out;
}

// n TCP connections to 127.0.0.1:port that never send a byte.
std::vector<int> OpenConnections(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (fd >= 0) close(fd);
      break;
    }
    fds.push_back(fd);
  }
  return fds;
}

void CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

// The numbers data_server printed on exit ("connections: 17 accepted, 384
// shed, 0 accept errors, ...").
struct ConnectionStats {
  int accepted = -1, shed = -1, accept_errors = -1;
};
ConnectionStats ParseConnectionStats(const std::string& log) {
  ConnectionStats s;
  size_t at = log.rfind("connections: ");
  if (at != std::string::npos) {
    std::sscanf(log.c_str() + at, "connections: %d accepted, %d shed, %d accept errors",
                &s.accepted, &s.shed, &s.accept_errors);
  }
  return s;
}

TEST(DataServerTest, ListensOnExactlyTheAddressItIsGiven) {
  std::string dir = testing::MakeTempDir("served");
  testing::PackSynthetic(dir, 100, 0, 50);
  for (const auto& [address, hex] : {std::pair<std::string, std::string>{"127.0.0.1:0", "0100007F"},
                                     {"0.0.0.0:0", "00000000"}}) {
    DataServer::Options o;
    o.address = address;
    auto server = StartServer(dir, o);
    ASSERT_NE(server, nullptr);
    std::vector<std::string> sockets = ListeningSockets();
    EXPECT_EQ(sockets, std::vector<std::string>{absl::StrFormat("%s:%04X", hex, server->port())})
        << address << ": listening on " << absl::StrJoin(sockets, ", ");
    auto remote = RemoteTier::Connect(ClientOptions(server->port()));
    ASSERT_TRUE(remote.ok()) << remote.status();
  }
  // Ports outside 0..65535 are refused, not taken modulo 2^16 (getaddrinfo
  // turned 99999 into 34463).
  for (const std::string address : {"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:",
                                    "127.0.0.1:123456", "127.0.0.1:-1", "127.0.0.1:8x"}) {
    auto source = DirectorySource::Open(dir);
    ASSERT_TRUE(source.ok()) << source.status();
    DataServer::Options o;
    o.token = testing::kToken;
    o.address = address;
    auto server = DataServer::Start(std::shared_ptr<DataSource>(std::move(*source)), o);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << address;
  }
}

// A connection flood past the server's descriptor limit (64), held open
// without a byte sent (a slowloris), then closed; a legitimate client gets
// in while the flood holds and after it ends. Once with the default
// connection cap, once with a cap above the limit, so accept itself runs
// out of descriptors (EMFILE), which ends gRPC 1.51's own listener for good.
TEST(DataServerTest, SurvivesAConnectionFloodPastItsDescriptorLimit) {
  std::string dir = testing::MakeTempDir("served");
  Manifest manifest = testing::PackSynthetic(dir, 2000, 0, 500);
  for (const std::string cap : {"--max_connections=0", "--max_connections=1000"}) {
    SCOPED_TRACE(cap);
    std::string scratch = testing::MakeTempDir("server");
    ASSERT_TRUE(WriteFileAtomically(scratch, "token", testing::kToken).ok());
    testing::ServerProcess server(dir, scratch + "/token", scratch);
    server.set_max_open_files(64);
    server.set_flags({cap, "--handshake_timeout_ms=1000"});
    int port = server.Start(0);
    ASSERT_GT(port, 0) << server.ReadStderr();

    std::vector<int> flood = OpenConnections(port, 400);
    EXPECT_EQ(flood.size(), 400u);
    RemoteTier::Options o = ClientOptions(port);
    o.read_timeout = absl::Seconds(15);
    absl::Time start = absl::Now();
    auto during = RemoteTier::Connect(o);
    ASSERT_TRUE(during.ok()) << "no call got through while the flood held: " << during.status();
    std::printf("%s: a call got through %.2f s into a 400-connection slowloris\n", cap.c_str(),
                absl::ToDoubleSeconds(absl::Now() - start));
    EXPECT_EQ(**(*during)->Get("train/7"), testing::SampleBytesOf("train/7"));
    CloseAll(&flood);

    flood = OpenConnections(port, 400);
    CloseAll(&flood);
    absl::SleepFor(absl::Milliseconds(200));
    auto after = RemoteTier::Connect(o);
    ASSERT_TRUE(after.ok()) << "no call got through after the flood: " << after.status();
    std::vector<std::string> keys = manifest.SampleKeys();
    keys.resize(300);
    auto got = (*after)->GetBatch(keys);
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].status();
      ASSERT_EQ(**got[i], testing::SampleBytesOf(keys[i]));
    }
    std::string log = server.Stop();
    ConnectionStats stats = ParseConnectionStats(log);
    EXPECT_GT(stats.shed, 0) << log;
    if (cap == "--max_connections=1000") {
      EXPECT_GT(stats.accept_errors, 0) << log;
    }
    std::printf("%s", log.c_str());
  }
}

// Errors tell the client what happened, not the server's paths or file
// names, and do not echo the key back (the client names it itself).
TEST(DataServerTest, ErrorsNameNeitherServerPathsNorTheKey) {
  std::string dir = testing::MakeTempDir("very-private-server-dir");
  Manifest manifest = testing::PackSynthetic(dir, 200, 0, 100);
  auto server = StartServer(dir);
  ASSERT_NE(server, nullptr);
  auto remote = RemoteTier::Connect(ClientOptions(server->port()));
  ASSERT_TRUE(remote.ok());
  auto missing = (*remote)->Get("train/987654321");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  const std::string message(missing.status().message());
  EXPECT_FALSE(absl::StrContains(message, "very-private-server-dir")) << message;
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(message, "987654321")).size(), 2u)
      << "the key appears more than once (echoed by the server): " << message;
  auto no_shard = (*remote)->Get("no-such-shard.gws");
  EXPECT_TRUE(absl::IsNotFound(no_shard.status()));
  EXPECT_FALSE(absl::StrContains(no_shard.status().message(), "very-private")) << no_shard.status();

  // A damaged record on the server: DATA_LOSS, final (not retried), and
  // still no path or shard file name.
  const ShardInfo& shard = manifest.shards()[0];
  int fd = open(absl::StrCat(dir, "/", shard.name).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(shard.bytes - 1)), 1);
  c = static_cast<char>(~c);
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(shard.bytes - 1)), 1);
  close(fd);
  const std::string last = Manifest::SampleKey(shard.split, shard.first_index + shard.count - 1);
  uint64_t calls = (*remote)->counters().calls;
  for (auto damaged : {(*remote)->Get(last), (*remote)->GetBatch({last})[0]}) {
    EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
    EXPECT_FALSE(absl::StrContains(damaged.status().message(), "very-private")) << damaged.status();
    EXPECT_FALSE(absl::StrContains(damaged.status().message(), shard.name)) << damaged.status();
  }
  EXPECT_EQ((*remote)->counters().calls, calls + 2) << "the server's DATA_LOSS was retried";
  EXPECT_EQ(server->stats().source_errors, 2u);
  EXPECT_EQ(server->stats().not_found, 2u);
}

TEST(TokenTest, NormalizedOrRefusedWithoutQuotingIt) {
  EXPECT_EQ(*NormalizeToken(" \tjob-7f3a-secret\r\n"), "job-7f3a-secret");
  for (std::string bad :
       {std::string(""), std::string("\n"), std::string("job 7f3a"), std::string("job\n7f3a"),
        std::string("job\x01"
                    "7f3a"),
        std::string("j\xc3\xb6"
                    "b-7f3a"),
        std::string("job\x7f"), std::string("x\0y", 3), std::string(kMaxTokenBytes + 1, 'k')}) {
    absl::StatusOr<std::string> t = NormalizeToken(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << absl::CEscape(bad);
    if (bad.size() > 2 && bad.size() < 100) {
      EXPECT_FALSE(absl::StrContains(t.status().message(), bad)) << t.status();
    }
  }
  std::string scratch = testing::MakeTempDir("token");
  ASSERT_TRUE(WriteFileAtomically(scratch, "t", "job-7f3a-secret\n").ok());
  EXPECT_EQ(*ReadTokenFile(scratch + "/t"), "job-7f3a-secret");
}

// The client normalizes the token as the server does, refuses what gRPC
// would abort on, and the server refuses such a token too.
TEST(TokenTest, ClientTokensWithStrayBytesNeverAbort) {
  std::string dir = testing::MakeTempDir("served");
  testing::PackSynthetic(dir, 100, 0, 50);
  auto server = StartServer(dir);
  ASSERT_NE(server, nullptr);
  RemoteTier::Options o = ClientOptions(server->port());
  o.token = absl::StrCat(testing::kToken, "\n");  // as open(path).read() gives it
  auto remote = RemoteTier::Connect(o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(**(*remote)->Get("train/3"), testing::SampleBytes("train", 3));
  // gRPC aborts the whole process (rc 134) on such metadata: run it in a
  // child so a regression fails this test instead of ending the run.
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  for (std::string bad : {std::string("job\n7f3a"),
                          std::string("j\xc3\xb6"
                                      "b"),
                          std::string("job\x01"
                                      "7f3a")}) {
    EXPECT_EXIT(
        {
          o.token = bad;
          o.read_timeout = absl::Seconds(2);
          auto r = RemoteTier::Connect(o);
          std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
          std::exit(absl::IsInvalidArgument(r.status()) ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "token byte");
  }
  DataServer::Options so;
  so.token = "two words";
  auto source = DirectorySource::Open(dir);
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(
      DataServer::Start(std::shared_ptr<DataSource>(std::move(*source)), so).status()));
}

// More misses than one GetBatch may carry (the server allows 16,384 keys)
// are fetched in several calls.
TEST(RemoteTierLimitsTest, FetchOfMoreKeysThanABatchIsSplit) {
  std::string dir = testing::MakeTempDir("served");
  Manifest manifest = testing::PackSynthetic(dir, 20000, 0, 5000, 8);
  auto server = StartServer(dir);
  ASSERT_NE(server, nullptr);
  auto remote = RemoteTier::Connect(ClientOptions(server->port()));
  ASSERT_TRUE(remote.ok());
  auto cache = DataCache::Create(std::shared_ptr<DataSource>(std::move(*remote)), {});
  ASSERT_TRUE(cache.ok());
  std::vector<std::string> keys = manifest.SampleKeys();
  ASSERT_EQ(keys.size(), 20000u);
  size_t from_source = 0;
  std::vector<absl::StatusOr<Blob>> got = (*cache)->Fetch(keys, &from_source);
  EXPECT_EQ(from_source, keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status();
    ASSERT_EQ(**got[i], testing::SampleBytesOf(keys[i], 8));
  }
  EXPECT_EQ(server->stats().objects, keys.size());
}

// Retries last as long as read_timeout allows, not a fixed few attempts:
// a server back 3 s after the first attempt is reached with 300 ms calls;
// one that never comes back fails at read_timeout, not before.
TEST(RemoteTierLimitsTest, RetriesSpanTheReadTimeout) {
  std::string dir = testing::MakeTempDir("served");
  testing::PackSynthetic(dir, 100, 0, 50);
  std::string scratch = testing::MakeTempDir("server");
  ASSERT_TRUE(WriteFileAtomically(scratch, "token", testing::kToken).ok());
  testing::ServerProcess server(dir, scratch + "/token", scratch);
  const int port = server.Start(0);
  ASSERT_GT(port, 0);
  server.Kill();

  RemoteTier::Options o = ClientOptions(port);
  o.call_timeout = absl::Milliseconds(300);
  o.read_timeout = absl::Seconds(10);
  std::thread restart([&] {
    absl::SleepFor(absl::Seconds(3));
    server.Start(port);
  });
  absl::Time start = absl::Now();
  auto remote = RemoteTier::Connect(o);
  absl::Duration took = absl::Now() - start;
  restart.join();
  ASSERT_TRUE(remote.ok()) << "gave up after " << took << ": " << remote.status();
  EXPECT_GE(took, absl::Seconds(2.5));
  EXPECT_EQ(**(*remote)->Get("train/3"), testing::SampleBytes("train", 3));

  server.Kill();
  o.read_timeout = absl::Seconds(2);
  start = absl::Now();
  auto gone = RemoteTier::Connect(o);
  took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(gone.status()) || absl::IsDeadlineExceeded(gone.status()))
      << gone.status();
  EXPECT_GE(took, absl::Seconds(1.5)) << "gave up long before read_timeout";
  EXPECT_LE(took, absl::Seconds(2.6)) << "outlived read_timeout";
}

// A stand-in server that answers the first `busy` calls RESOURCE_EXHAUSTED
// (as gRPC does when a server is out of threads) and Get NOT_FOUND.
class BusyService final : public proto::DataService::Service {
 public:
  BusyService(std::string manifest, int busy) : manifest_(std::move(manifest)), busy_(busy) {}
  grpc::Status GetManifest(grpc::ServerContext*, const proto::GetManifestRequest*,
                           proto::GetManifestReply* reply) override {
    ++calls;
    if (busy_-- > 0) return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");
    reply->set_manifest(manifest_);
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const proto::GetRequest*,
                   grpc::ServerWriter<proto::Chunk>*) override {
    ++calls;
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such object");
  }
  std::atomic<int> calls{0};

 private:
  const std::string manifest_;
  std::atomic<int> busy_;
};

TEST(RemoteTierLimitsTest, ResourceExhaustedIsRetriedNotFoundIsNot) {
  std::string dir = testing::MakeTempDir("served");
  Manifest manifest = testing::PackSynthetic(dir, 100, 0, 50);
  BusyService service(manifest.Serialize(), 3);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  auto remote = RemoteTier::Connect(ClientOptions(port));
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ((*remote)->counters().retries, 3u);
  EXPECT_EQ(service.calls.load(), 4);
  EXPECT_TRUE(absl::IsNotFound((*remote)->Get("train/1").status()));
  EXPECT_EQ(service.calls.load(), 5) << "NOT_FOUND was retried";
  server->Shutdown();
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
