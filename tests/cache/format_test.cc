// Manifest, shard format, DirectorySource and packing real Fashion-MNIST.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/dataset_packer.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/manifest.h"
#include "gradwire/lib/cache/shard_format.h"
#include "gradwire/tests/cache/test_dataset.h"
#include "gradwire/tools/idx_file.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace cache {
namespace {

using testing::ListDir;
using testing::MakeTempDir;
using testing::PackSynthetic;
using testing::SampleBytes;

void FlipByte(const std::string& path, off_t offset) {
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char c;
  ASSERT_EQ(pread(fd, &c, 1, offset), 1);
  c ^= 0x20;
  ASSERT_EQ(pwrite(fd, &c, 1, offset), 1);
  close(fd);
}

TEST(ManifestTest, RoundTripsAndLocatesSamples) {
  std::string dir = MakeTempDir("manifest");
  Manifest m = PackSynthetic(dir, 1000, 300, 128);
  EXPECT_EQ(m.num_samples(), 1300u);
  EXPECT_EQ(m.shards().size(), 8u + 3u);
  absl::StatusOr<Manifest> parsed = Manifest::Parse(m.Serialize());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->version(), m.version());
  EXPECT_EQ(parsed->Serialize(), m.Serialize());

  absl::StatusOr<SampleLocation> at = m.LocateSample("train/999");
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(m.shards()[at->shard].name, "train-00007.gws");
  EXPECT_EQ(at->record, 999u - 7 * 128);
  EXPECT_TRUE(absl::IsNotFound(m.LocateSample("train/1000").status()));
  EXPECT_TRUE(absl::IsNotFound(m.LocateSample("train/007").status()));
  EXPECT_TRUE(absl::IsNotFound(m.LocateSample("nosuch/1").status()));
  EXPECT_TRUE(absl::IsNotFound(m.LocateSample("train").status()));
}

TEST(ManifestTest, TamperedManifestIsRejected) {
  std::string dir = MakeTempDir("manifest");
  Manifest m = PackSynthetic(dir, 100, 10, 50);
  std::string text = m.Serialize();
  size_t at = text.find("train 0 50");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "train 0 49");
  absl::StatusOr<Manifest> parsed = Manifest::Parse(text);
  EXPECT_TRUE(absl::IsDataLoss(parsed.status())) << parsed.status();
  EXPECT_TRUE(absl::IsDataLoss(Manifest::Parse("garbage").status()));
}

// Shards no packer writes, each refused with the reason (found by
// tests/fuzz/input_fuzzer.cc: sample ranges that wrapped past 2^64 - 1
// were accepted, overlapping shards too, and a sample count no file
// could index reached SampleKeys).
TEST(ManifestTest, RefusesShardsNoFileCanHold) {
  const uint64_t kMax = ~uint64_t{0};
  auto create = [](std::vector<ShardInfo> shards) {
    return Manifest::Create("d", std::move(shards)).status();
  };
  // EncodeShard's own size for 5000 samples of 100 bytes is accepted.
  const uint64_t bytes = kShardHeaderBytes + 5000 * (kShardIndexEntryBytes + 100);
  EXPECT_TRUE(create({{"a.gws", "train", 0, 5000, bytes, 1}}).ok());
  struct Case {
    const char* what;
    std::vector<ShardInfo> shards;
    const char* says;
  };
  const Case cases[] = {
      {"more samples than the index can hold",
       {{"a.gws", "train", 0, 5, kShardHeaderBytes + 4 * kShardIndexEntryBytes, 1}},
       "claims 5 samples"},
      {"fewer bytes than a header", {{"a.gws", "train", 0, 0, 31, 1}}, "claims 0 samples"},
      {"a range past 2^64 - 1", {{"a.gws", "train", kMax, 2, 1000, 1}}, "pass 2^64 - 1"},
      {"overlap hidden by a wrap",
       {{"a.gws", "train", kMax - 5, 10, 1000, 1}, {"b.gws", "train", kMax - 3, 1, 1000, 1}},
       "pass 2^64 - 1"},
      {"bytes adding up past 2^64 - 1",
       {{"a.gws", "train", 0, 1, kMax - 10, 1}, {"b.gws", "train", 1, 1, 1000, 1}},
       "add up past"},
  };
  for (const Case& c : cases) {
    absl::Status s = create(c.shards);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.what << ": " << s;
  }
  // Through Parse, which a data source's manifest takes: DataLoss.
  auto parsed = Manifest::Parse(
      "gradwire-manifest 1\ndataset d\nversion 0000000000000000\n"
      "shard a.gws train 18446744073709551615 2 100 0123456789abcdef\n");
  EXPECT_TRUE(absl::IsDataLoss(parsed.status())) << parsed.status();
  EXPECT_NE(parsed.status().message().find("pass 2^64 - 1"), std::string::npos) << parsed.status();
}

TEST(ManifestTest, ChangingAnyShardChangesTheVersion) {
  std::string a = MakeTempDir("va"), b = MakeTempDir("vb");
  Manifest ma = PackSynthetic(a, 100, 10, 50, 100);
  Manifest mb = PackSynthetic(b, 100, 10, 50, 101);
  EXPECT_NE(ma.version(), mb.version());
}

// Random damage to a manifest: parsed back only if it still describes the
// same dataset version; never a crash.
TEST(ManifestTest, RandomDamageNeverYieldsAnotherVersion) {
  std::string dir = MakeTempDir("manifest");
  Manifest m = PackSynthetic(dir, 300, 30, 64);
  const std::string text = m.Serialize();
  uint64_t state = 42;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string damaged = text;
    int edits = 1 + next() % 3;
    for (int e = 0; e < edits; ++e) {
      size_t at = (next() >> 33) % damaged.size();
      switch (next() % 3) {
        case 0:
          damaged[at] = static_cast<char>(next() >> 56);
          break;
        case 1:
          damaged.erase(at, 1 + (next() >> 60));
          break;
        default:
          damaged.insert(at, 1, static_cast<char>(next() >> 56));
          break;
      }
      if (damaged.empty()) damaged = "x";
    }
    auto parsed = Manifest::Parse(damaged);
    if (parsed.ok()) {
      ++accepted;
      EXPECT_EQ(parsed->Serialize(), text) << "damage accepted as a different manifest";
    }
  }
  std::printf("%d of 5000 damaged manifests still parsed (all to the original)\n", accepted);
}

TEST(DirectorySourceTest, ServesExactBytesOfSamplesAndShards) {
  std::string dir = MakeTempDir("dirsrc");
  Manifest m = PackSynthetic(dir, 500, 100, 64);
  DirectorySource::Options options;
  options.verify_shards = true;
  auto source = DirectorySource::Open(dir, options);
  ASSERT_TRUE(source.ok()) << source.status();
  for (uint64_t i = 0; i < 500; ++i) {
    auto blob = (*source)->Get(Manifest::SampleKey("train", i));
    ASSERT_TRUE(blob.ok()) << blob.status();
    ASSERT_EQ(**blob, SampleBytes("train", i)) << i;
  }
  auto shard = (*source)->Get("test-00001.gws");
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(Checksum64(**shard), m.FindShard("test-00001.gws")->checksum);
  EXPECT_TRUE(absl::IsNotFound((*source)->Get("train/500").status()));
  EXPECT_TRUE(absl::IsNotFound((*source)->Get("nosuch.gws").status()));
}

TEST(DirectorySourceTest, FlippedByteIsDataLossNotServed) {
  std::string dir = MakeTempDir("dirsrc");
  Manifest m = PackSynthetic(dir, 200, 0, 100);
  // Last byte of the last record of train-00001: a sample's payload.
  FlipByte(absl::StrCat(dir, "/train-00001.gws"), m.FindShard("train-00001.gws")->bytes - 1);
  auto source = DirectorySource::Open(dir);
  ASSERT_TRUE(source.ok()) << source.status();  // headers are intact
  EXPECT_TRUE((*source)->Get("train/198").ok());
  auto bad = (*source)->Get("train/199");
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_TRUE(absl::IsDataLoss((*source)->Get("train-00001.gws").status()));
  DirectorySource::Options verify;
  verify.verify_shards = true;
  EXPECT_TRUE(absl::IsDataLoss(DirectorySource::Open(dir, verify).status()));
}

TEST(DirectorySourceTest, TruncatedShardIsRefusedAtOpen) {
  std::string dir = MakeTempDir("dirsrc");
  PackSynthetic(dir, 200, 0, 100);
  ASSERT_EQ(truncate(absl::StrCat(dir, "/train-00000.gws").c_str(), 1000), 0);
  auto source = DirectorySource::Open(dir);
  EXPECT_TRUE(absl::IsDataLoss(source.status())) << source.status();
}

// A pack that the manifest would refuse writes nothing: a split named
// "../x" once wrote a shard beside out_dir, one holding a NUL replaced the
// file its name was cut to, and a refused re-pack left new shards under
// the old MANIFEST (served under the old version).
TEST(PackDatasetTest, RefusedPackWritesNothing) {
  const std::string root = MakeTempDir("pack");
  const std::string out = root + "/out";
  ASSERT_TRUE(PackDataset(out, "good", {{"train", {"A", "A"}}}, 10).ok());
  const std::string victim = root + "/victim.txt";
  ASSERT_TRUE(WriteFileAtomically(root, "victim.txt", "precious").ok());
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  const std::vector<std::string> before = sorted(ListDir(out));
  for (const auto& [id, split] : std::vector<std::pair<std::string, std::string>>{
           {"good", "../evil"},
           {"good", std::string("../victim.txt\0", 14)},
           {"good", std::string("ok\0/../x", 9)},
           {"bad id!", "train"},
           {std::string("id\0x", 4), "train"}}) {
    absl::StatusOr<Manifest> m = PackDataset(out, id, {{split, {"B", "B"}}}, 10);
    EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << absl::CHexEscape(split) << m.status();
  }
  EXPECT_EQ(sorted(ListDir(out)), before);
  EXPECT_EQ(sorted(ListDir(root)), (std::vector<std::string>{"out", "victim.txt"}));
  EXPECT_EQ(*ReadWholeFile(victim), "precious");
  auto source = DirectorySource::Open(out);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(**(*source)->Get("train/1"), "A");  // the old dataset, whole
}

// Packing again into the same directory replaces the dataset: shards the
// previous MANIFEST named and the new one does not are removed (they were
// left behind), files no manifest names stay, and the new pack reads whole.
TEST(PackDatasetTest, RepackRemovesOnlyThePreviousPacksShards) {
  const std::string out = MakeTempDir("repack");
  ASSERT_TRUE(PackDataset(out, "old", {{"train", {"A", "A", "A"}}, {"test", {"T"}}}, 1).ok());
  ASSERT_TRUE(WriteFileAtomically(out, "notes.txt", "mine").ok());
  ASSERT_TRUE(WriteFileAtomically(out, "train-00009.gws", "not the packer's").ok());
  absl::StatusOr<Manifest> m = PackDataset(out, "new", {{"train", {"B", "B"}}}, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  auto listed = ListDir(out);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"MANIFEST", "notes.txt", "train-00000.gws",
                                              "train-00009.gws"}));
  auto source = DirectorySource::Open(out);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(**(*source)->Get("train/1"), "B");
  EXPECT_FALSE((*source)->Get("test/0").ok());
  // A damaged MANIFEST names nothing: the re-pack removes no file.
  ASSERT_TRUE(WriteFileAtomically(out, "MANIFEST", "not a manifest").ok());
  ASSERT_TRUE(PackDataset(out, "newer", {{"train", {"C"}}}, 1).ok());
  listed = ListDir(out);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"MANIFEST", "notes.txt", "train-00000.gws",
                                              "train-00009.gws"}));
}

// Files the cache reads whole (manifests, tokens) and shards are regular
// files: a FIFO is refused at once instead of blocking its opener forever,
// and a whole-file read has a size limit.
TEST(DirectorySourceTest, FifosAndHugeFilesAreRefusedNotWaitedOn) {
  const std::string dir = MakeTempDir("dirsrc");
  PackSynthetic(dir, 100, 0, 50);
  const std::string shard = dir + "/train-00001.gws";
  ASSERT_EQ(unlink(shard.c_str()), 0);
  ASSERT_EQ(mkfifo(shard.c_str(), 0600), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(DirectorySource::Open(dir).status()));
  const std::string other = MakeTempDir("dirsrc");
  ASSERT_EQ(mkfifo((other + "/MANIFEST").c_str(), 0600), 0);
  absl::Status s = DirectorySource::Open(other).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("FIFO"), absl::string_view::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(ReadWholeFile("/dev/zero").status()));
  ASSERT_TRUE(WriteFileAtomically(other, "big", std::string(5000, 'x')).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadWholeFile(other + "/big", 4096).status()));
  EXPECT_TRUE(ReadWholeFile(other + "/big", 5000).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadWholeFile(std::string("/etc/hostname\0x", 16)).status()));
}

// The shard layout is on disk and in manifests' checksums: these bytes were
// written by the code before base/coding.h and must not change.
TEST(ShardFormatTest, BytesAreThoseOfFormatVersion1) {
  EXPECT_EQ(absl::BytesToHexString(EncodeShard(5, {"ab", "", "xyz"})),
            "4757534841524431010000000300000005000000000000005a0fbded431f267c"
            "68000000000000000200000000000000614ad092ca08f7656a00000000000000"
            "000000000000000099e9d85137db46ef6a000000000000000300000000000000"
            "a13c835b4648bafe616278797a");
}

TEST(ShardFormatTest, RejectsIndexPointingOutsideTheFile) {
  std::string shard = EncodeShard(0, {"abc", "defg"});
  auto header = DecodeShardHeader(shard);
  ASSERT_TRUE(header.ok());
  auto records = DecodeShardIndex(
      *header, absl::string_view(shard).substr(kShardHeaderBytes, header->index_bytes()),
      shard.size());
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(shard.substr((*records)[1].offset, (*records)[1].length), "defg");
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeShardIndex(*header,
                       absl::string_view(shard).substr(kShardHeaderBytes, header->index_bytes()),
                       shard.size() - 1)
          .status()));
  EXPECT_TRUE(
      absl::IsDataLoss(DecodeShardHeader("GWSHARD0xxxxxxxxxxxxxxxxxxxxxxxxxxxxx").status()));
}

// IDX headers (tools/idx_file.h) whose dimensions disagree with the data
// are refused, including dimensions whose product wraps past 2^64 to the
// data's size (2^16 x 2^16 x 2^16 x 2^16 = 2^64 = 0 bytes: accepted
// before, and pack_dataset then read past the data).
TEST(IdxFileTest, RefusesDimensionsTheDataCannotHold) {
  const std::string dir = MakeTempDir("idx");
  auto write = [&](const std::string& name, std::vector<uint32_t> dims, size_t data_bytes) {
    std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
    for (uint32_t d : dims) {
      for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>(d >> shift));
    }
    bytes.append(data_bytes, 'x');
    const std::string path = dir + "/" + name;
    FILE* f = fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
    return path;
  };
  auto good = tools::ReadIdxFile(write("good", {3, 2, 2}, 12));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->item_bytes(), 4u);
  for (const auto& [name, dims, data] :
       std::vector<std::tuple<std::string, std::vector<uint32_t>, size_t>>{
           {"short", {3, 2, 2}, 11},
           {"long", {3, 2, 2}, 13},
           {"wraps to zero", {65536, 65536, 65536, 65536}, 0},
           {"far more than the data", {1000000, 1000000}, 16},
       }) {
    auto read = tools::ReadIdxFile(write("bad", dims, data));
    EXPECT_TRUE(absl::IsDataLoss(read.status())) << name << ": " << read.status();
  }
}

// One gzip member holding `data`.
std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

// Gzipped IDX files: members one after another are read as one file (what
// `gzip -c a b` writes); bytes after the last member, a cut member, damaged
// data and a FIFO are refused (gzread ignored the trailing bytes, and
// gzopen blocked on a FIFO).
TEST(IdxFileTest, GzipMembersReadWholeOrRefused) {
  const std::string dir = MakeTempDir("idxgz");
  const std::string idx = std::string{0, 0, 0x08, 2, 0, 0, 0, 3, 0, 0, 0, 4} + "abcdefghijkl";
  auto write = [&](const std::string& name, const std::string& bytes) {
    EXPECT_TRUE(WriteFileAtomically(dir, name, bytes).ok()) << name;
    return dir + "/" + name;
  };
  const std::string one = Gzip(idx);
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"one member", one},
           {"two members", Gzip(idx.substr(0, 5)) + Gzip(idx.substr(5))},
           {"plain", idx},
       }) {
    auto read = tools::ReadIdxFile(write("good", bytes));
    ASSERT_TRUE(read.ok()) << name << ": " << read.status();
    EXPECT_EQ(read->data, "abcdefghijkl") << name;
  }
  // Found under the name + ".gz" too.
  write("data.gz", one);
  auto by_suffix = tools::ReadIdxFile(dir + "/data");
  ASSERT_TRUE(by_suffix.ok()) << by_suffix.status();
  EXPECT_EQ(by_suffix->data, "abcdefghijkl");

  std::string damaged = one;
  damaged[damaged.size() / 2] ^= 0x5a;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"trailing bytes", one + "junk"},
           {"trailing zeros", one + std::string(3, '\0')},
           {"cut member", one.substr(0, one.size() - 6)},
           {"damaged", damaged},
       }) {
    auto read = tools::ReadIdxFile(write("bad", bytes));
    EXPECT_TRUE(absl::IsDataLoss(read.status())) << name << ": " << read.status();
  }
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = tools::ReadIdxFile(fifo);
  EXPECT_TRUE(absl::IsInvalidArgument(from_fifo.status())) << from_fifo.status();
}

// The real dataset: Debian's dataset-fashion-mnist (tools/install_deps.sh).
TEST(FashionMnistTest, PackedSamplesMatchTheIdxFiles) {
  const std::string src = "/usr/share/datasets/fashion-mnist";
  auto images = tools::ReadIdxFile(src + "/t10k-images-idx3-ubyte");
  auto labels = tools::ReadIdxFile(src + "/t10k-labels-idx1-ubyte");
  if (absl::IsNotFound(images.status())) {
    GTEST_SKIP() << "SKIPPED: dataset-fashion-mnist not installed";
  }
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_TRUE(labels.ok()) << labels.status();
  ASSERT_EQ(images->dims.size(), 3u);
  EXPECT_EQ(images->dims[0], 10000u);
  EXPECT_EQ(images->item_bytes(), 784u);
  SplitRecords test{"test", {}};
  for (uint32_t i = 0; i < images->dims[0]; ++i) {
    test.records.push_back(std::string(1, labels->data[i]) + images->data.substr(i * 784, 784));
  }
  std::string dir = MakeTempDir("fmnist");
  auto m = PackDataset(dir, "fashion-mnist-test", {test}, 5000);
  ASSERT_TRUE(m.ok()) << m.status();
  auto source = DirectorySource::Open(dir);
  ASSERT_TRUE(source.ok()) << source.status();
  for (uint32_t i : {0u, 1u, 4999u, 5000u, 9999u}) {
    auto blob = (*source)->Get(Manifest::SampleKey("test", i));
    ASSERT_TRUE(blob.ok());
    EXPECT_EQ((*blob)->size(), 785u);
    EXPECT_EQ((**blob)[0], labels->data[i]);
    EXPECT_EQ((*blob)->substr(1), images->data.substr(i * 784, 784));
  }
}

TEST(AtomicFileTest, AbandonedTempIsRemovedLiveOneIsKept) {
  std::string dir = MakeTempDir("atomic");
  // A temp file nobody holds: its writer is gone.
  std::string orphan = absl::StrCat(kTempPrefix, "12345.0.dead");
  ASSERT_TRUE(WriteFileAtomically(dir, orphan, "x").ok());  // named like a temp
  auto live = TempFile::Create(dir);
  ASSERT_TRUE(live.ok());
  std::string live_name = live->path().substr(dir.size() + 1);
  EXPECT_TRUE(IsTempFileName(live_name));
  auto removed = RemoveAbandonedTempFile(dir, orphan);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  auto kept = RemoveAbandonedTempFile(dir, live_name);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(*kept);  // the OFD lock of a live writer protects it
  EXPECT_EQ(access(live->path().c_str(), F_OK), 0);
  // Under the creating name, unlocked: a writer between open and lock (kept)
  // or one killed there (removed once older than the grace period).
  std::string creating = absl::StrCat(kCreatingPrefix, "12345.1.dead");
  ASSERT_TRUE(WriteFileAtomically(dir, creating, "").ok());
  auto young = RemoveAbandonedTempFile(dir, creating);
  ASSERT_TRUE(young.ok());
  EXPECT_FALSE(*young);
  const std::string creating_path = absl::StrCat(dir, "/", creating);
  struct timeval old_times[2] = {{time(nullptr) - kCreatingGraceSeconds - 5, 0},
                                 {time(nullptr) - kCreatingGraceSeconds - 5, 0}};
  ASSERT_EQ(utimes(creating_path.c_str(), old_times), 0);
  auto old = RemoveAbandonedTempFile(dir, creating);
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(*old);
  EXPECT_NE(access(creating_path.c_str(), F_OK), 0);
}

// A cleaner sweeping the directory while writers create temp files (a
// process opening a shared disk tier as others fill it) never removes a
// file a live writer is about to write: every publish succeeds.
TEST(AtomicFileTest, CleanerNeverRemovesATempFileBeingCreated) {
  const std::string dir = MakeTempDir("atomic-race");
  std::atomic<bool> stop{false};
  std::thread cleaner([&] {
    while (!stop.load()) {
      DIR* listing = opendir(dir.c_str());
      if (listing == nullptr) continue;
      std::vector<std::string> names;
      while (struct dirent* d = readdir(listing)) names.emplace_back(d->d_name);
      closedir(listing);
      for (const std::string& name : names) {
        if (IsTempFileName(name)) RemoveAbandonedTempFile(dir, name).IgnoreError();
      }
    }
  });
  int failed = 0, published = 0;
  const absl::Time until = absl::Now() + absl::Seconds(2);
  for (int i = 0; absl::Now() < until || published < 2000; ++i) {
    auto temp = TempFile::Create(dir);
    absl::Status s = temp.ok() ? temp->Append("x") : temp.status();
    if (s.ok()) s = temp->PublishAsNew(absl::StrCat("entry", i));
    if (!s.ok() && failed++ < 3) ADD_FAILURE() << s;
    if (s.ok()) ++published;
  }
  stop = true;
  cleaner.join();
  std::printf("%d published, %d failed\n", published, failed);
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace cache
}  // namespace gradwire
