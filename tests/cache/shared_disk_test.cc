// Four reader processes, one data server, one disk-tier directory they all
// share (the common case: one process per GPU, one local SSD). Each entry
// is fetched from the server once, every byte read is correct, and the
// directory never holds more than its budget.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/data_server.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/disk_tier.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

constexpr int kReaders = 4;

struct ReaderResult {
  int exit_code = -1;
  uint64_t reads = 0, wrong = 0, source_reads = 0, disk_hits = 0;
  std::string output;
};

// Runs kReaders shared_reader processes against `port` on `disk_dir`,
// calling `watch` every 5 ms while they run.
std::vector<ReaderResult> RunReaders(int port, const std::string& disk_dir, uint64_t budget,
                                     int epochs, const std::function<void()>& watch) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::string binary =
      absl::StrCat(srcdir != nullptr ? srcdir : ".", "/gradwire/tests/cache/shared_reader");
  std::string scratch = testing::MakeTempDir("readers");
  std::vector<pid_t> pids;
  for (int r = 0; r < kReaders; ++r) {
    std::vector<std::string> args = {binary,
                                     absl::StrCat(port),
                                     testing::kToken,
                                     disk_dir,
                                     absl::StrCat(budget),
                                     absl::StrCat(100 + r),
                                     absl::StrCat(epochs)};
    std::string out = absl::StrCat(scratch, "/out", r);
    pid_t pid = fork();
    if (pid == 0) {  // exec at once: the parent runs gRPC threads
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(&a[0]);
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<ReaderResult> results(kReaders);
  int running = kReaders;
  absl::Time deadline = absl::Now() + absl::Seconds(240);
  while (running > 0 && absl::Now() < deadline) {
    watch();
    for (int r = 0; r < kReaders; ++r) {
      int status = 0;
      if (pids[r] > 0 && waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[r] = -1;
        --running;
      }
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (int r = 0; r < kReaders; ++r) {
    if (pids[r] > 0) kill(pids[r], SIGKILL);
    auto text = ReadWholeFile(absl::StrCat(scratch, "/out", r));
    results[r].output = text.ok() ? *text : "";
    size_t at = results[r].output.rfind("\nreads ");
    at = at == std::string::npos ? 0 : at + 1;
    if (absl::StartsWith(absl::string_view(results[r].output).substr(at), "reads ")) {
      unsigned long long reads, wrong, source, disk;
      if (std::sscanf(results[r].output.c_str() + at,
                      "reads %llu wrong %llu source_reads %llu disk_hits %llu", &reads, &wrong,
                      &source, &disk) == 4) {
        results[r] = {results[r].exit_code, reads, wrong, source, disk, results[r].output};
      }
    }
  }
  return results;
}

// Bytes of entry and temp files in `dir` (what the budget covers).
uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& name : testing::ListDir(dir)) {
    if (!absl::EndsWith(name, ".gwc") && !IsTempFileName(name)) continue;
    struct stat st;
    if (stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

struct Served {
  Manifest manifest;
  std::unique_ptr<DataServer> server;
};

Served Serve(uint64_t samples) {
  Served s;
  std::string dir = testing::MakeTempDir("served");
  s.manifest = testing::PackSynthetic(dir, samples, 0, 1000);
  auto source = DirectorySource::Open(dir);
  EXPECT_TRUE(source.ok());
  DataServer::Options o;
  o.token = testing::kToken;
  auto server = DataServer::Start(std::shared_ptr<DataSource>(std::move(*source)), o);
  EXPECT_TRUE(server.ok()) << server.status();
  s.server = std::move(*server);
  return s;
}

TEST(SharedDiskTest, FourReadersFetchEachEntryOnce) {
  Served s = Serve(3000);
  std::string disk = testing::MakeTempDir("shared-disk");
  std::vector<ReaderResult> results = RunReaders(s.server->port(), disk, 64 << 20, 2, [] {});
  uint64_t source_reads = 0;
  for (const ReaderResult& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.reads, 2 * 3000u) << r.output;
    EXPECT_EQ(r.wrong, 0u) << r.output;
    source_reads += r.source_reads;
    std::printf("reader: %s", r.output.c_str());
  }
  const DataServer::Stats stats = s.server->stats();
  std::printf("server: %s\n", FormatServerStats(stats).c_str());
  EXPECT_EQ(stats.objects, 3000u) << "the server served some entries more than once";
  EXPECT_EQ(source_reads, 3000u);
}

TEST(SharedDiskTest, SharedBudgetHoldsAtEveryMoment) {
  Served s = Serve(3000);
  std::string disk = testing::MakeTempDir("shared-disk");
  const uint64_t entry = DiskTier::EntryBytes("train/1000", 130);
  const uint64_t budget = 1000 * entry;  // about a third of the dataset
  uint64_t peak = 0;
  std::vector<ReaderResult> results = RunReaders(
      s.server->port(), disk, budget, 2, [&] { peak = std::max(peak, DirectoryBytes(disk)); });
  for (const ReaderResult& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.wrong, 0u) << r.output;
  }
  const uint64_t end = DirectoryBytes(disk);
  std::printf("budget %llu bytes: peak %llu, end %llu\n", static_cast<unsigned long long>(budget),
              static_cast<unsigned long long>(peak), static_cast<unsigned long long>(end));
  EXPECT_LE(peak, budget);
  EXPECT_LE(end, budget);
  EXPECT_GT(end, budget / 2) << "the shared tier barely filled";
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
