// RemoteTier against a DataServer: exact bytes, chunked large objects,
// token and version checks, missing keys, and a server killed mid-epoch.
#include "gradwire/lib/cache/remote_tier.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/data_cache.h"
#include "gradwire/lib/cache/data_server.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/epoch_order.h"
#include "gradwire/tests/cache/server_process.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

using testing::kToken;
using testing::MakeTempDir;
using testing::PackSynthetic;
using testing::SampleBytes;
using testing::SampleBytesOf;
using testing::ServerProcess;

struct Served {
  std::string dir;
  Manifest manifest;
  std::unique_ptr<DataServer> server;
};

Served Serve(uint64_t train, size_t per_shard, int max_message_bytes = 4 << 20) {
  Served s;
  s.dir = MakeTempDir("served");
  s.manifest = PackSynthetic(s.dir, train, 50, per_shard);
  auto source = DirectorySource::Open(s.dir);
  EXPECT_TRUE(source.ok());
  DataServer::Options o;
  o.token = kToken;
  o.max_message_bytes = max_message_bytes;
  auto server = DataServer::Start(std::shared_ptr<DataSource>(std::move(*source)), o);
  EXPECT_TRUE(server.ok()) << server.status();
  s.server = std::move(*server);
  return s;
}

RemoteTier::Options ClientOptions(int port) {
  RemoteTier::Options o;
  o.target = absl::StrCat("127.0.0.1:", port);
  o.token = kToken;
  return o;
}

TEST(RemoteTierTest, ConcurrentReadersGetExactBytes) {
  Served s = Serve(3000, 500);
  auto remote = RemoteTier::Connect(ClientOptions(s.server->port()));
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ((*remote)->manifest().version(), s.manifest.version());
  std::vector<std::string> keys = s.manifest.SampleKeys();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> batch;
      for (size_t i = t; i < keys.size(); i += 4) {
        batch.push_back(keys[i]);
        if (batch.size() == 97 || i + 4 >= keys.size()) {
          auto got = (*remote)->GetBatch(batch);
          for (size_t j = 0; j < batch.size(); ++j) {
            if (!got[j].ok() || **got[j] != SampleBytesOf(batch[j])) ++wrong;
          }
          batch.clear();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  auto one = (*remote)->Get("test/49");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(**one, SampleBytes("test", 49));
}

TEST(RemoteTierTest, ObjectsLargerThanTheMessageCapArriveInChunks) {
  Served s = Serve(2000, 1000, 64 * 1024);  // shards of ~130 KB, cap 64 KB
  RemoteTier::Options o = ClientOptions(s.server->port());
  o.max_message_bytes = 64 * 1024;
  o.chunk_bytes = 16 * 1024;
  auto remote = RemoteTier::Connect(o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  const ShardInfo* shard = s.manifest.FindShard("train-00001.gws");
  ASSERT_GT(shard->bytes, 64u * 1024);
  auto blob = (*remote)->Get(shard->name);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ((*blob)->size(), shard->bytes);
  EXPECT_EQ(Checksum64(**blob), shard->checksum);
}

TEST(RemoteTierTest, WrongOrMissingTokenIsRejected) {
  Served s = Serve(100, 50);
  RemoteTier::Options o = ClientOptions(s.server->port());
  o.token = "job-7f3a-secreT";
  auto remote = RemoteTier::Connect(o);
  EXPECT_TRUE(absl::IsUnauthenticated(remote.status())) << remote.status();
  o.token = "";
  EXPECT_TRUE(absl::IsUnauthenticated(RemoteTier::Connect(o).status()));
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
}

TEST(RemoteTierTest, MissingKeysAreNotFoundAndVersionsArePinned) {
  Served s = Serve(100, 50);
  auto remote = RemoteTier::Connect(ClientOptions(s.server->port()));
  ASSERT_TRUE(remote.ok());
  EXPECT_TRUE(absl::IsNotFound((*remote)->Get("train/100").status()));
  EXPECT_TRUE(absl::IsNotFound((*remote)->Get("nosuch.gws").status()));
  auto batch = (*remote)->GetBatch({"train/1", "train/100", "test/2"});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(**batch[0], SampleBytes("train", 1));
  EXPECT_TRUE(absl::IsNotFound(batch[1].status())) << batch[1].status();
  EXPECT_EQ(**batch[2], SampleBytes("test", 2));

  RemoteTier::Options o = ClientOptions(s.server->port());
  o.expected_version = s.manifest.version() ^ 1;
  auto pinned = RemoteTier::Connect(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(pinned.status())) << pinned.status();
}

TEST(RemoteTierTest, NoServerFailsWithinTheReadDeadline) {
  RemoteTier::Options o = ClientOptions(1);  // nothing listens on port 1
  o.call_timeout = absl::Milliseconds(300);
  o.read_timeout = absl::Seconds(1);
  absl::Time start = absl::Now();
  auto remote = RemoteTier::Connect(o);
  absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(remote.status()) || absl::IsDeadlineExceeded(remote.status()))
      << remote.status();
  EXPECT_LE(took, absl::Milliseconds(1500));
  // The message says the channel never connected, not just "Deadline Exceeded".
  EXPECT_NE(remote.status().message().find("no connection to it"), absl::string_view::npos)
      << remote.status();
}

TEST(RemoteTierTest, ServerKilledMidEpochReadsFailInTimeAndRecover) {
  std::string dir = MakeTempDir("served");
  Manifest manifest = PackSynthetic(dir, 2000, 0, 500);
  std::string scratch = MakeTempDir("server");
  ASSERT_TRUE(WriteFileAtomically(scratch, "token", kToken).ok());
  ServerProcess server(dir, scratch + "/token", scratch);
  int port = server.Start(0);
  ASSERT_GT(port, 0) << "data_server did not start";

  RemoteTier::Options o = ClientOptions(port);
  o.call_timeout = absl::Milliseconds(500);
  o.read_timeout = absl::Seconds(2);
  o.max_attempts = 3;
  auto remote = RemoteTier::Connect(o);
  ASSERT_TRUE(remote.ok()) << remote.status();
  DataCache::Options co;
  co.memory_budget_bytes = 1 << 20;
  auto cache = DataCache::Create(std::shared_ptr<DataSource>(std::move(*remote)), co);
  ASSERT_TRUE(cache.ok());
  std::vector<std::string> order = *EpochOrder(manifest.SampleKeys(), 5, 1, 0, 1);
  size_t i = 0;
  for (; i < order.size() / 2; ++i) ASSERT_EQ(**(*cache)->Get(order[i]), SampleBytesOf(order[i]));

  server.Kill();
  for (int n = 0; n < 3; ++n, ++i) {
    absl::Time start = absl::Now();
    auto v = (*cache)->Get(order[i]);
    absl::Duration took = absl::Now() - start;
    EXPECT_FALSE(v.ok());
    EXPECT_TRUE(absl::IsUnavailable(v.status()) || absl::IsDeadlineExceeded(v.status()))
        << v.status();
    EXPECT_LE(took, o.read_timeout + absl::Milliseconds(500)) << "read outlived its deadline";
  }

  ASSERT_EQ(server.Start(port), port) << "could not restart the server on its port";
  absl::Time deadline = absl::Now() + absl::Seconds(15);
  absl::StatusOr<Blob> v = absl::UnavailableError("not tried");
  while (absl::Now() < deadline && !(v = (*cache)->Get(order[i])).ok()) {
  }
  ASSERT_TRUE(v.ok()) << "no recovery after the server returned: " << v.status();
  for (; i < order.size(); ++i) ASSERT_EQ(**(*cache)->Get(order[i]), SampleBytesOf(order[i]));
  std::printf("%s", (*cache)->FormatStats().c_str());
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
