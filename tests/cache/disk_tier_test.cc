#include "gradwire/lib/cache/disk_tier.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

using testing::ListDir;
using testing::MakeTempDir;
using testing::SampleBytes;

constexpr uint64_t kVersion = 0x1234;

DiskTier::Options TierOptions(const std::string& dir, uint64_t budget = 1 << 24) {
  DiskTier::Options o;
  o.dir = dir;
  o.budget_bytes = budget;
  o.dataset_version = kVersion;
  return o;
}

std::unique_ptr<DiskTier> OpenTier(const std::string& dir, uint64_t budget = 1 << 24,
                                   EvictionPolicy policy = EvictionPolicy::kFillOnce,
                                   uint64_t version = kVersion) {
  DiskTier::Options o = TierOptions(dir, budget);
  o.policy = policy;
  o.dataset_version = version;
  auto tier = DiskTier::Open(o);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? *std::move(tier) : nullptr;
}

std::string Key(int i) { return Manifest::SampleKey("train", i); }

// Peak resident set (VmHWM) since the last ResetPeakRss, in bytes.
void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }
uint64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  uint64_t kb = 0;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmHWM:")) {
      absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(6)), " kB"), &kb);
    }
  }
  return kb << 10;
}

// A 2 GiB sparse file (zeros: no entry header) at dir/name.
void MakeSparseFile(const std::string& dir, const std::string& name) {
  int fd = open(absl::StrCat(dir, "/", name).c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{2} << 30), 0);
  close(fd);
}

TEST(DiskTierTest, RoundTripAndRebuildIndexOnOpen) {
  std::string dir = MakeTempDir("disk");
  {
    auto tier = OpenTier(dir);
    for (int i = 0; i < 200; ++i)
      ASSERT_TRUE(tier->Insert(Key(i), MakeBlob(SampleBytes("train", i))).ok());
    EXPECT_TRUE(absl::IsNotFound(tier->Lookup("train/999").status()));
  }
  auto tier = OpenTier(dir);
  EXPECT_EQ(tier->open_report().entries, 200u);
  EXPECT_EQ(tier->entry_count(), 200u);
  for (int i = 0; i < 200; ++i) {
    auto v = tier->Lookup(Key(i));
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(**v, SampleBytes("train", i));
  }
}

// Entry files written before base/coding.h must still be read: the bytes
// of one entry, name included, as that code wrote them.
TEST(DiskTierTest, EntryBytesAreThoseOfFormatGwcache1) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  ASSERT_TRUE(tier->Insert("train/7", MakeBlob("hello")).ok());
  EXPECT_EQ(DiskTier::EntryFileName(kVersion, "train/7"), "a88e4ac22350dbd611d8ceada06ca7df.gwc");
  auto bytes = ReadWholeFile(absl::StrCat(dir, "/a88e4ac22350dbd611d8ceada06ca7df.gwc"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(absl::BytesToHexString(*bytes),
            "4757434143484531070000000000000034120000000000000500000000000000"
            "a36d9f887d82c726a6d73a50ad22c424747261696e2f3768656c6c6f");
}

TEST(DiskTierTest, OtherDatasetVersionIsNeverServed) {
  std::string dir = MakeTempDir("disk");
  {
    auto old_tier = OpenTier(dir, 1 << 24, EvictionPolicy::kFillOnce, 111);
    ASSERT_TRUE(old_tier->Insert("train/1", MakeBlob("old bytes")).ok());
  }
  auto tier = OpenTier(dir, 1 << 24, EvictionPolicy::kFillOnce, 222);
  EXPECT_EQ(tier->open_report().stale_removed, 1u);
  EXPECT_TRUE(absl::IsNotFound(tier->Lookup("train/1").status()));
}

TEST(DiskTierTest, ThousandFlippedBytesAreAllDetectedAndQuarantined) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  const int n = 1000;
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(tier->Insert(Key(i), MakeBlob(SampleBytes("train", i))).ok());
  // One flipped byte per entry, anywhere: header, key or value.
  for (int i = 0; i < n; ++i) {
    std::string path = absl::StrCat(dir, "/", DiskTier::EntryFileName(kVersion, Key(i)));
    int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    off_t size = lseek(fd, 0, SEEK_END);
    off_t at = (static_cast<off_t>(i) * 7919) % size;
    char c;
    ASSERT_EQ(pread(fd, &c, 1, at), 1);
    c ^= static_cast<char>(1 << (i % 8));
    ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
    close(fd);
  }
  int detected = 0;
  for (int i = 0; i < n; ++i) {
    auto v = tier->Lookup(Key(i));
    ASSERT_FALSE(v.ok()) << "corrupt entry " << i << " was served";
    if (absl::IsDataLoss(v.status())) ++detected;
  }
  EXPECT_EQ(detected, n);
  EXPECT_EQ(tier->quarantined(), static_cast<uint64_t>(n));
  EXPECT_EQ(ListDir(dir + "/quarantine").size(), static_cast<size_t>(n));
  EXPECT_EQ(tier->entry_count(), 0u);
  // Quarantined entries are plain misses now and can be written again.
  EXPECT_TRUE(absl::IsNotFound(tier->Lookup(Key(0)).status()));
  ASSERT_TRUE(tier->Insert(Key(0), MakeBlob(SampleBytes("train", 0))).ok());
  EXPECT_EQ(**tier->Lookup(Key(0)), SampleBytes("train", 0));
}

TEST(DiskTierTest, CorruptEntriesFoundAtOpenAreQuarantined) {
  std::string dir = MakeTempDir("disk");
  {
    auto tier = OpenTier(dir);
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(tier->Insert(Key(i), MakeBlob(SampleBytes("train", i))).ok());
  }
  std::string path = absl::StrCat(dir, "/", DiskTier::EntryFileName(kVersion, Key(3)));
  ASSERT_EQ(truncate(path.c_str(), 60), 0);  // a torn file under a final name
  auto tier = OpenTier(dir);
  EXPECT_EQ(tier->open_report().corrupt_quarantined, 1u);
  EXPECT_EQ(tier->entry_count(), 9u);
  EXPECT_TRUE(absl::IsNotFound(tier->Lookup(Key(3)).status()));
}

// What the tier finds in its directory never makes it touch anything
// outside: a symbolic link put in place of quarantine/ once had its
// target directory emptied at Open, one in place of the shared ledger had
// its target overwritten, and a FIFO under an entry's name blocked Open
// forever.
TEST(DiskTierTest, LinksAndFifosInTheDirectoryReachNothingOutside) {
  const std::string dir = MakeTempDir("disk");
  const std::string victim = MakeTempDir("victim");
  ASSERT_TRUE(WriteFileAtomically(victim, "thesis.tex", "work").ok());
  ASSERT_TRUE(WriteFileAtomically(victim, "ledger.txt", "precious").ok());
  {
    auto tier = OpenTier(dir);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(tier->Insert(Key(i), MakeBlob(SampleBytes("train", i))).ok());
  }
  ASSERT_EQ(rmdir((dir + "/quarantine").c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/quarantine").c_str()), 0);
  const std::string entry = absl::StrCat(dir, "/", DiskTier::EntryFileName(kVersion, Key(2)));
  ASSERT_EQ(unlink(entry.c_str()), 0);
  ASSERT_EQ(mkfifo(entry.c_str(), 0600), 0);
  {
    auto tier = OpenTier(dir);  // returns: the FIFO is not waited on
    ASSERT_NE(tier, nullptr);
    EXPECT_FALSE(tier->Lookup(Key(2)).ok());  // not served, and not waited on
    EXPECT_TRUE(tier->Lookup(Key(3)).ok());
  }
  EXPECT_EQ(*ReadWholeFile(victim + "/thesis.tex"), "work");
  struct stat st;
  ASSERT_EQ(lstat((dir + "/quarantine").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << "quarantine/ is a directory of the tier's own again";

  ASSERT_EQ(unlink((dir + "/.gwshared").c_str()), 0);
  ASSERT_EQ(symlink((victim + "/ledger.txt").c_str(), (dir + "/.gwshared").c_str()), 0);
  absl::StatusOr<std::unique_ptr<DiskTier>> refused = DiskTier::Open(TierOptions(dir));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_EQ(*ReadWholeFile(victim + "/ledger.txt"), "precious");
}

// A directory holding anything but the cache's own files is refused: the
// tier removes files by name there (a .tmp.* or *.gwc of the user's, the
// contents of a quarantine/), and pointed at a home directory or /dev it
// deleted what matched.
TEST(DiskTierTest, OnlyADirectoryOfItsOwn) {
  const std::string dir = MakeTempDir("home");
  ASSERT_TRUE(WriteFileAtomically(dir, "thesis.tex", "work").ok());
  ASSERT_TRUE(WriteFileAtomically(dir, ".tmp.keep", "mine").ok());
  ASSERT_TRUE(WriteFileAtomically(dir, "b.gwc", "mine too").ok());
  absl::StatusOr<std::unique_ptr<DiskTier>> refused = DiskTier::Open(TierOptions(dir));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_EQ(*ReadWholeFile(dir + "/.tmp.keep"), "mine");
  EXPECT_EQ(*ReadWholeFile(dir + "/b.gwc"), "mine too");
  EXPECT_TRUE(absl::IsFailedPrecondition(DiskTier::Open(TierOptions("/dev")).status()));
  // New, empty, or its own from before: taken.
  EXPECT_NE(OpenTier(MakeTempDir("fresh") + "/cache"), nullptr);
  const std::string own = MakeTempDir("own");
  { EXPECT_NE(OpenTier(own), nullptr); }
  EXPECT_NE(OpenTier(own), nullptr);
}

// A file is judged by its 48-byte header before any other byte is read:
// a 2 GiB sparse file under an entry's name costs neither 2 GiB of memory
// nor the seconds reading it would take, at Open or at Lookup.
TEST(DiskTierTest, HugeFileIsJudgedByItsHeaderNotRead) {
  std::string dir = MakeTempDir("disk");
  ASSERT_TRUE(OpenTier(dir)->Insert(Key(1), MakeBlob(SampleBytes("train", 1))).ok());
  const std::string name = DiskTier::EntryFileName(kVersion, Key(2));
  MakeSparseFile(dir, name);
  const uint64_t budget = uint64_t{1} << 40;  // room for the file: only its header can refuse it
  ResetPeakRss();
  uint64_t rss_before = PeakRssBytes();
  absl::Time start = absl::Now();
  auto tier = OpenTier(dir, budget);
  absl::Duration took = absl::Now() - start;
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(tier->open_report().corrupt_quarantined, 1u);
  EXPECT_EQ(tier->open_report().entries, 1u);
  EXPECT_LT(took, absl::Seconds(2)) << "Open read the sparse file";
  EXPECT_LT(PeakRssBytes() - rss_before, uint64_t{64} << 20) << "Open read the sparse file";

  MakeSparseFile(dir, name);
  ResetPeakRss();
  rss_before = PeakRssBytes();
  start = absl::Now();
  auto v = tier->Lookup(Key(2));
  took = absl::Now() - start;
  EXPECT_TRUE(absl::IsDataLoss(v.status())) << v.status();
  EXPECT_LT(took, absl::Seconds(2)) << "Lookup read the sparse file";
  EXPECT_LT(PeakRssBytes() - rss_before, uint64_t{64} << 20) << "Lookup read the sparse file";
  EXPECT_EQ(**tier->Lookup(Key(1)), SampleBytes("train", 1));
}

// A valid entry of another key under this key's name (a careless copy or
// restore) is moved to its own name, and this key's next fill lands: it is
// not a miss every epoch.
TEST(DiskTierTest, MisplacedEntryIsRepairedNotMissedForever) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  const std::string a = SampleBytes("train", 1), b = SampleBytes("train", 2);
  ASSERT_TRUE(tier->Insert(Key(1), MakeBlob(a)).ok());
  ASSERT_TRUE(tier->Insert(Key(2), MakeBlob(b)).ok());
  const std::string name1 = DiskTier::EntryFileName(kVersion, Key(1));
  const std::string name2 = DiskTier::EntryFileName(kVersion, Key(2));
  auto entry2 = ReadWholeFile(absl::StrCat(dir, "/", name2));
  ASSERT_TRUE(entry2.ok());
  ASSERT_TRUE(WriteFileAtomically(dir, name1, *entry2).ok());  // key 2's entry as key 1's file

  EXPECT_TRUE(absl::IsNotFound(tier->Lookup(Key(1)).status()));
  ASSERT_TRUE(tier->Insert(Key(1), MakeBlob(a)).ok());  // the fill after the miss
  auto v1 = tier->Lookup(Key(1));
  ASSERT_TRUE(v1.ok()) << "key 1 is still a miss after its fill: " << v1.status();
  EXPECT_EQ(**v1, a);
  EXPECT_EQ(**tier->Lookup(Key(2)), b);

  // Found at Open: key 2's entry alone, under key 3's name.
  std::string dir2 = MakeTempDir("disk");
  ASSERT_TRUE(WriteFileAtomically(dir2, DiskTier::EntryFileName(kVersion, Key(3)), *entry2).ok());
  auto reopened = OpenTier(dir2);
  EXPECT_EQ(reopened->open_report().misplaced_repaired, 1u);
  EXPECT_EQ(reopened->open_report().corrupt_quarantined, 0u);
  EXPECT_EQ(**reopened->Lookup(Key(2)), b);
  EXPECT_TRUE(absl::IsNotFound(reopened->Lookup(Key(3)).status()));
}

TEST(DiskTierTest, BudgetFillOnceAndLru) {
  const uint64_t entry = DiskTier::EntryBytes(Key(0), 100);
  {
    auto tier = OpenTier(MakeTempDir("disk"), 10 * entry + 5);
    int ok = 0;
    for (int i = 0; i < 10; ++i) ok += tier->Insert(Key(i), MakeBlob(std::string(100, 'x'))).ok();
    EXPECT_EQ(ok, 10);
    absl::Status full = tier->Insert(Key(10), MakeBlob(std::string(100, 'x')));
    EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
    EXPECT_TRUE(tier->Lookup(Key(0)).ok());  // fill-once never evicts
    absl::Status big = tier->Insert("train/99", MakeBlob(std::string(20 * entry, 'x')));
    EXPECT_TRUE(absl::IsOutOfRange(big)) << big;
  }
  {
    std::string dir = MakeTempDir("disk");
    auto tier = OpenTier(dir, 10 * entry + 5, EvictionPolicy::kLru);
    for (int i = 0; i < 15; ++i)
      ASSERT_TRUE(tier->Insert(Key(i), MakeBlob(std::string(100, 'x'))).ok());
    EXPECT_LE(tier->used_bytes(), 10 * entry + 5);
    EXPECT_TRUE(absl::IsNotFound(tier->Lookup(Key(0)).status()));
    EXPECT_TRUE(tier->Lookup(Key(14)).ok());
    EXPECT_EQ(ListDir(dir).size(), 10u + 2u);  // entries + quarantine/ + .gwshared
  }
}

TEST(DiskTierTest, ConcurrentReadersNeverSeeTornEntries) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  std::atomic<int> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < 600; ++n) {
        int i = (n * 31 + t * 17) % 150;
        auto v = tier->Lookup(Key(i));
        if (v.ok()) {
          ++hits;
          if (**v != SampleBytes("train", i)) ++wrong;
        } else if (absl::IsNotFound(v.status())) {
          tier->Insert(Key(i), MakeBlob(SampleBytes("train", i))).IgnoreError();
        } else {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
}

TEST(DiskTierTest, ProcessesShareOneDirectory) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);  // opened before the other process writes
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto other = DiskTier::Open(TierOptions(dir));
    if (!other.ok()) _exit(2);
    for (int i = 0; i < 50; ++i) {
      if (!(*other)->Insert(Key(i), MakeBlob(SampleBytes("train", i))).ok()) _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int i = 0; i < 50; ++i) {
    auto v = tier->Lookup(Key(i));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(**v, SampleBytes("train", i));
  }
  EXPECT_EQ(tier->entry_count(), 50u);
}

// A fetch claim is held while its process lives and dies with it: another
// process (or tier) waits while the holder lives and takes the claim over
// once it is killed.
TEST(DiskTierTest, FetchClaimDiesWithItsProcess) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto holder = DiskTier::Open(TierOptions(dir));
    char ok = holder.ok() && (*holder)->TryClaim(Key(5)) == SharedDirectory::Claim::kClaimed;
    if (write(ready[1], &ok, 1) != 1) _exit(2);
    pause();  // holds the claim until killed
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_TRUE(ok) << "the child could not claim the entry";
  EXPECT_EQ(tier->TryClaim(Key(5)), SharedDirectory::Claim::kBusy);
  EXPECT_EQ(tier->TryClaim(Key(6)), SharedDirectory::Claim::kClaimed);  // other entries are free
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(tier->TryClaim(Key(5)), SharedDirectory::Claim::kClaimed)
      << "the claim of a killed process still blocks";
  EXPECT_EQ(tier->TryClaim(Key(5)), SharedDirectory::Claim::kBusy);  // held by this one now
  tier->ReleaseClaim(Key(5));
  EXPECT_EQ(tier->TryClaim(Key(5)), SharedDirectory::Claim::kClaimed);
  close(ready[0]);
  close(ready[1]);
}

// A cache directory on a read-only filesystem still serves its entries:
// there is no shared ledger or claim table to write, and inserts fail.
TEST(DiskTierTest, ReadOnlyDirectoryServesWhatItHolds) {
  std::string dir = MakeTempDir("disk");
  ASSERT_TRUE(OpenTier(dir)->Insert(Key(1), MakeBlob(SampleBytes("train", 1))).ok());
  unlink(
      absl::StrCat(dir, "/", SharedDirectory::kFileName).c_str());  // as an older version left it
  if (mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
    GTEST_SKIP() << "cannot mount read-only here: " << strerror(errno);
  }
  {
    auto tier = DiskTier::Open(TierOptions(dir));
    ASSERT_TRUE(tier.ok()) << tier.status();
    auto v = (*tier)->Lookup(Key(1));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(**v, SampleBytes("train", 1));
    EXPECT_FALSE((*tier)->Insert(Key(2), MakeBlob("x")).ok());
    EXPECT_EQ((*tier)->TryClaim(Key(2)), SharedDirectory::Claim::kNone);
  }
  umount2(dir.c_str(), MNT_DETACH);
}

// Every truncation of an entry file (a torn write that got a name) is
// refused, never served short.
TEST(DiskTierTest, EveryTruncationIsDetected) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  const std::string value = SampleBytes("train", 7, 800);
  ASSERT_TRUE(tier->Insert(Key(7), MakeBlob(value)).ok());
  std::string path = absl::StrCat(dir, "/", DiskTier::EntryFileName(kVersion, Key(7)));
  auto original = ReadWholeFile(path);
  ASSERT_TRUE(original.ok());
  for (size_t len = 0; len < original->size(); ++len) {
    ASSERT_TRUE(WriteFileAtomically(dir, DiskTier::EntryFileName(kVersion, Key(7)),
                                    original->substr(0, len))
                    .ok());
    auto v = tier->Lookup(Key(7));
    ASSERT_FALSE(v.ok()) << "served a " << len << "-byte truncation";
  }
}

// Two writer processes and this reader on one directory at the same time:
// every read is a miss or the exact bytes.
TEST(DiskTierTest, ConcurrentProcessesNeverServeTornEntries) {
  std::string dir = MakeTempDir("disk");
  auto tier = OpenTier(dir);
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      DiskTier::Options o = TierOptions(dir, 1 << 26);
      o.sync = false;  // speed: atomicity does not depend on it
      auto other = DiskTier::Open(o);
      if (!other.ok()) _exit(2);
      for (int round = 0; round < 3; ++round) {
        std::vector<std::pair<std::string, Blob>> batch;
        for (int i = 0; i < 300; ++i) {
          int k = (i * (w + 1) + round * 7) % 300;
          batch.emplace_back(Key(k), MakeBlob(SampleBytes("train", k, 1500)));
          if (batch.size() == 20) {
            (*other)->InsertBatch(batch);
            batch.clear();
          }
        }
        // Remove some so later rounds rename over and recreate entries.
        for (int k = round; k < 300; k += 5) {
          unlink(absl::StrCat(dir, "/", DiskTier::EntryFileName(kVersion, Key(k))).c_str());
        }
      }
      _exit(0);
    }
    children.push_back(child);
  }
  int served = 0;
  bool running = true;
  while (running) {
    for (int k = 0; k < 300; ++k) {
      auto v = tier->Lookup(Key(k));
      if (v.ok()) {
        ++served;
        ASSERT_EQ(**v, SampleBytes("train", k, 1500)) << "key " << k;
      } else {
        ASSERT_TRUE(absl::IsNotFound(v.status())) << v.status();
      }
    }
    running = false;
    for (pid_t c : children) {
      if (waitpid(c, nullptr, WNOHANG) == 0) running = true;
    }
  }
  EXPECT_GT(served, 0);
  EXPECT_EQ(tier->quarantined(), 0u);
}

// Writers killed at random points during 1000 puts, 20 times: after each
// kill a fresh Open leaves no temp file and serves only intact entries.
TEST(DiskTierCrashTest, SigkillDuringPutsLeavesNoTempAndNoCorruptEntry) {
  std::string dir = MakeTempDir("crash");
  unsigned seed = 12345;
  int total_served = 0;
  for (int round = 0; round < 20; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto tier = DiskTier::Open(TierOptions(dir, 1 << 26));
      if (!tier.ok()) _exit(2);
      // Odd rounds use the group-commit path (InsertBatch: syncfs, then
      // renames), even rounds one fdatasync + rename per entry.
      std::vector<std::pair<std::string, Blob>> batch;
      for (int i = 0; i < 1000; ++i) {
        // Rewrites keys other rounds wrote too: renames over live entries.
        int k = (i + round * 337) % 1500;
        Blob value = MakeBlob(SampleBytes("train", k, 2000));
        if (round % 2 == 0) {
          (*tier)->Insert(Key(k), value).IgnoreError();
          continue;
        }
        batch.emplace_back(Key(k), value);
        if (batch.size() == 25) {
          (*tier)->InsertBatch(batch);
          batch.clear();
        }
      }
      _exit(0);
    }
    // Kill anywhere from before Open to near the end of the puts.
    usleep(rand_r(&seed) % 300000);
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);

    auto tier = OpenTier(dir, 1 << 26);
    ASSERT_NE(tier, nullptr);
    for (const std::string& name : ListDir(dir)) {
      EXPECT_FALSE(IsTempFileName(name)) << "temp file left after open: " << name;
    }
    EXPECT_EQ(tier->open_report().corrupt_quarantined, 0u)
        << "a published entry was torn (round " << round << ")";
    // Opened alone, the tier recounts its budget: what a killed writer had
    // reserved but not published is not lost for good.
    uint64_t entry_bytes = 0;
    for (const std::string& name : ListDir(dir)) {
      struct stat st;
      if (absl::EndsWith(name, ".gwc") && stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0) {
        entry_bytes += static_cast<uint64_t>(st.st_size);
      }
    }
    EXPECT_EQ(tier->used_bytes(), entry_bytes) << "round " << round;
    for (int k = 0; k < 1500; ++k) {
      auto v = tier->Lookup(Key(k));
      if (v.ok()) {
        ++total_served;
        ASSERT_EQ(**v, SampleBytes("train", k, 2000)) << "round " << round << " key " << k;
      } else {
        ASSERT_TRUE(absl::IsNotFound(v.status())) << v.status();
      }
    }
  }
  EXPECT_GT(total_served, 0);
  std::printf("crash test: %d intact entries served across 20 kills\n", total_served);
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
