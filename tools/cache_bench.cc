// cache_bench: reads a dataset served by tools/data_server through the
// multi-level cache for several shuffled epochs and budgets, next to the
// baselines measured in the same run:
//   page cache      pread of the same samples from a local copy (warm)
//   remote direct   one round trip per sample, no prefetch, no cache
//   remote prefetch the prefetcher over the remote tier, no cache tiers
// Prints one markdown table row per epoch. tools/cache_bench.sh runs it
// against a server behind a shaped link in network namespaces.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/data_cache.h"
#include "gradwire/lib/cache/epoch_order.h"
#include "gradwire/lib/cache/prefetcher.h"
#include "gradwire/lib/cache/remote_tier.h"
#include "gradwire/lib/cache/shard_format.h"
#include "gradwire/lib/cache/token.h"
#include "gradwire/tools/command_line.h"

ABSL_FLAG(std::string, target, "", "data server host:port (required)");
ABSL_FLAG(std::string, token_file, "", "file holding the job's token (required)");
ABSL_FLAG(std::string, data_dir, "",
          "local copy of the packed dataset, for the page-cache baseline (required)");
ABSL_FLAG(std::string, disk_dir, "/var/tmp/gradwire-cache-bench",
          "where the disk tiers go: a fresh directory cache_bench.XXXXXX is made in it "
          "(created if missing) and removed at the end; nothing else in it is touched");
ABSL_FLAG(int, epochs, 3, "shuffled epochs per configuration");
ABSL_FLAG(uint64_t, seed, 1, "shuffle seed");
ABSL_FLAG(std::string, configs,
          "fill_once:25:25,fill_once:50:50,fill_once:100:100,lru:50:50,fill_once:25:100,"
          "fill_once:25:100:nosync",
          "comma-separated policy:memory_percent:disk_percent[:nosync]");
ABSL_FLAG(int, threads, 16, "prefetch threads");
ABSL_FLAG(int, depth, 0, "prefetch depth in samples; 0 = latency x bandwidth / sample size");
ABSL_FLAG(double, link_mbit, 200,
          "shaped link rate (Mbit/s): the % column and the depth's bandwidth");
ABSL_FLAG(int, direct_samples, 200, "samples read one round trip each (remote direct baseline)");
ABSL_FLAG(double, call_timeout_s, 10,
          "deadline of each call to the data server, seconds (0.001 to 3600)");
ABSL_FLAG(bool, disk_sync, true, "fdatasync + directory fsync per disk-tier publish");

namespace {

using namespace gradwire::cache;  // NOLINT: a tool, not a library

int Fail(const std::string& message) {
  std::fprintf(stderr, "cache_bench: %s\n", message.c_str());
  return 1;
}

// The same work on every sample's bytes in every mode, so modes differ only
// in where the bytes come from.
uint64_t Touch(const std::string& bytes, uint64_t acc) {
  for (unsigned char c : bytes) acc = acc * 31 + c;
  return acc;
}

struct Row {
  std::string mode, budget;
  int epoch = 0;
  uint64_t samples = 0, bytes = 0;
  double seconds = 0;
  std::string mem_hit = "-", disk_hit = "-";
  double cached = -1;  // fraction of samples in some tier when the epoch began
  double remote_mb = -1, bound_mb = -1, stall = -1, mem_warm = -1, disk_warm = -1;
};

void PrintHeader() {
  std::printf(
      "| mode | mem/disk budget | epoch | samples/s | payload MB/s | %% of link | cached at start "
      "| "
      "mem hit | disk hit | remote MB | bound MB | stall s | mem warm s | disk warm s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

void PrintRow(const Row& r, double link_bytes_per_s) {
  double rate = r.bytes / r.seconds;
  auto num = [](double v, const char* fmt) {
    return v < 0 ? std::string("-") : absl::StrFormat(fmt, v);
  };
  std::printf("| %s | %s | %d | %.0f | %.2f | %.1f%% | %s | %s | %s | %s | %s | %s | %s | %s |\n",
              r.mode.c_str(), r.budget.c_str(), r.epoch, r.samples / r.seconds, rate / 1e6,
              100 * rate / link_bytes_per_s, num(100 * r.cached, "%.2f%%").c_str(),
              r.mem_hit.c_str(), r.disk_hit.c_str(), num(r.remote_mb, "%.2f").c_str(),
              num(r.bound_mb, "%.2f").c_str(), num(r.stall, "%.3f").c_str(),
              num(r.mem_warm, "%.2f").c_str(), num(r.disk_warm, "%.2f").c_str());
  std::fflush(stdout);
}

// Raw pread of each sample from the packed files: the page-cache baseline.
class PageCacheReader {
 public:
  absl::Status Open(const std::string& dir, const Manifest& manifest) {
    manifest_ = &manifest;
    for (const ShardInfo& s : manifest.shards()) {
      int fd = open(absl::StrCat(dir, "/", s.name).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", dir, "/", s.name));
      fds_.push_back(fd);
      std::string head(kShardHeaderBytes, '\0');
      if (pread(fd, &head[0], head.size(), 0) != static_cast<ssize_t>(head.size())) {
        return absl::DataLossError("short shard header");
      }
      absl::StatusOr<ShardHeader> h = DecodeShardHeader(head);
      if (!h.ok()) return h.status();
      std::string index(h->index_bytes(), '\0');
      if (pread(fd, &index[0], index.size(), kShardHeaderBytes) !=
          static_cast<ssize_t>(index.size())) {
        return absl::DataLossError("short shard index");
      }
      absl::StatusOr<std::vector<ShardRecord>> r = DecodeShardIndex(*h, index, s.bytes);
      if (!r.ok()) return r.status();
      records_.push_back(*std::move(r));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Read(const std::string& key) const {
    absl::StatusOr<SampleLocation> at = manifest_->LocateSample(key);
    if (!at.ok()) return at.status();
    const ShardRecord& r = records_[at->shard][at->record];
    std::string out(r.length, '\0');
    if (pread(fds_[at->shard], &out[0], r.length, r.offset) != static_cast<ssize_t>(r.length)) {
      return absl::DataLossError("short read");
    }
    return out;
  }

 private:
  const Manifest* manifest_ = nullptr;
  std::vector<int> fds_;
  std::vector<std::vector<ShardRecord>> records_;
};

struct Config {
  EvictionPolicy policy;
  double memory_percent, disk_percent;
  bool disk_sync = true;
};

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "cache_bench", &exit_code)) return exit_code;
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const std::string disk_root = absl::GetFlag(FLAGS_disk_dir);
  const int epochs = absl::GetFlag(FLAGS_epochs);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const double link = absl::GetFlag(FLAGS_link_mbit) * 1e6 / 8;
  if (target.empty() || data_dir.empty() || absl::GetFlag(FLAGS_token_file).empty()) {
    return Fail("--target, --token_file and --data_dir are required");
  }
  if (epochs < 1 || !(link > 0) || !std::isfinite(link) || disk_root.empty()) {
    return Fail("--epochs >= 1, a finite --link_mbit > 0 and a --disk_dir are required");
  }
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_threads) > 1024 ||
      absl::GetFlag(FLAGS_depth) < 0 || absl::GetFlag(FLAGS_direct_samples) < 0) {
    return Fail(absl::StrCat("--threads must be in 1..1024 (got ", absl::GetFlag(FLAGS_threads),
                             "), --depth and --direct_samples at least 0 (got ",
                             absl::GetFlag(FLAGS_depth), ", ", absl::GetFlag(FLAGS_direct_samples),
                             ")"));
  }
  const double call_timeout_s = absl::GetFlag(FLAGS_call_timeout_s);
  if (!(call_timeout_s >= 0.001 && call_timeout_s <= 3600)) {
    return Fail(absl::StrCat("--call_timeout_s must be in 0.001..3600 (got ", call_timeout_s, ")"));
  }
  std::vector<Config> configs;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_configs), ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(c, ':');
    Config config;
    // An optional 4th field "nosync" publishes disk entries without fsync
    // (rename only), to show what durability costs.
    if (parts.size() == 4 && parts[3] == "nosync") {
      config.disk_sync = false;
      parts.pop_back();
    }
    absl::StatusOr<EvictionPolicy> policy =
        parts.size() == 3 ? ParseEvictionPolicy(parts[0]) : absl::InvalidArgumentError("");
    if (!policy.ok() || !absl::SimpleAtod(parts[1], &config.memory_percent) ||
        !absl::SimpleAtod(parts[2], &config.disk_percent) || !(config.memory_percent >= 0) ||
        !(config.disk_percent >= 0) || config.memory_percent > 1000 || config.disk_percent > 1000) {
      return Fail(absl::StrCat("--configs: bad entry '", c,
                               "' (want policy:mem%:disk%, each percentage in 0..1000)"));
    }
    config.policy = *policy;
    configs.push_back(config);
  }

  auto token = ReadTokenFile(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(token.status().ToString());
  RemoteTier::Options ro;
  ro.target = target;
  ro.token = *token;
  ro.call_timeout = absl::Seconds(call_timeout_s);
  ro.read_timeout = absl::Seconds(60);
  auto connected = RemoteTier::Connect(ro);
  if (!connected.ok()) return Fail(connected.status().ToString());
  std::shared_ptr<RemoteTier> remote(std::move(*connected));
  const Manifest& manifest = remote->manifest();
  const std::vector<std::string> keys = manifest.SampleKeys();

  absl::StatusOr<std::string> local_manifest = ReadWholeFile(data_dir + "/MANIFEST");
  absl::StatusOr<Manifest> local = local_manifest.ok()
                                       ? Manifest::Parse(*local_manifest)
                                       : absl::StatusOr<Manifest>(local_manifest.status());
  if (!local.ok()) return Fail(local.status().ToString());
  if (local->version() != manifest.version()) {
    return Fail("--data_dir holds another dataset version than the server");
  }
  PageCacheReader page_cache;
  if (absl::Status s = page_cache.Open(data_dir, *local); !s.ok()) return Fail(s.ToString());

  // Sizes per tier for the budgets, and a warm page cache for the baseline.
  uint64_t data_bytes = 0, memory_bytes = 0, disk_bytes = 0;
  uint64_t sink = 0;
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> bytes = page_cache.Read(key);
    if (!bytes.ok()) return Fail(bytes.status().ToString());
    sink = Touch(*bytes, sink);
    data_bytes += bytes->size();
    memory_bytes += bytes->size() + key.size() + 64;  // MemoryTier's charge
    disk_bytes += DiskTier::EntryBytes(key, bytes->size());
  }
  std::printf("dataset %s version %016llx: %zu samples, %.2f MB; link %.0f Mbit/s; %d epochs\n\n",
              manifest.dataset_id().c_str(), static_cast<unsigned long long>(manifest.version()),
              keys.size(), data_bytes / 1e6, link * 8 / 1e6, epochs);
  PrintHeader();

  std::vector<std::vector<std::string>> orders;
  for (int e = 1; e <= epochs; ++e) orders.push_back(*EpochOrder(keys, seed, e, 0, 1));

  // Baseline 1: the page cache.
  for (int e = 1; e <= epochs; ++e) {
    Row row{"page cache (pread)", "-", e};
    absl::Time t0 = absl::Now();
    for (const std::string& key : orders[e - 1]) {
      absl::StatusOr<std::string> bytes = page_cache.Read(key);
      if (!bytes.ok()) return Fail(bytes.status().ToString());
      sink = Touch(*bytes, sink);
      row.bytes += bytes->size();
      ++row.samples;
    }
    row.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    PrintRow(row, link);
  }

  // Baseline 2: remote, one round trip per sample.
  {
    Row row{"remote direct, no prefetch", "-", 1};
    absl::Time t0 = absl::Now();
    for (int i = 0; i < absl::GetFlag(FLAGS_direct_samples) && i < static_cast<int>(keys.size());
         ++i) {
      absl::StatusOr<Blob> blob = remote->Get(orders[0][i]);
      if (!blob.ok()) return Fail(blob.status().ToString());
      sink = Touch(**blob, sink);
      row.bytes += (*blob)->size();
      ++row.samples;
    }
    row.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    row.remote_mb = row.bytes / 1e6;
    PrintRow(row, link);
  }

  Prefetcher::Options po;
  po.threads = absl::GetFlag(FLAGS_threads);
  po.depth = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_depth)));
  po.bandwidth_bytes_per_second = link;
  po.item_timeout = absl::Seconds(120);

  auto run_epochs = [&](const std::string& mode, const std::string& budget,
                        const DataCache::Options& options, int n) -> absl::Status {
    absl::StatusOr<std::unique_ptr<DataCache>> cache = DataCache::Create(remote, options);
    if (!cache.ok()) return cache.status();
    for (int e = 1; e <= n; ++e) {
      // What the tiers hold before the epoch bounds what it may fetch.
      uint64_t cached_bytes = 0;
      for (const std::string& key : keys) {
        bool held = ((*cache)->memory() != nullptr && (*cache)->memory()->Contains(key)) ||
                    ((*cache)->disk() != nullptr && (*cache)->disk()->Contains(key));
        if (held) cached_bytes += 1;
      }
      double cached_fraction = double(cached_bytes) / keys.size();
      (*cache)->BeginEpoch(e);
      Row row{mode, budget, e};
      row.cached = cached_fraction;
      absl::Time t0 = absl::Now();
      {
        Prefetcher prefetcher(cache->get(), orders[e - 1], po);
        for (size_t i = 0; i < keys.size(); ++i) {
          absl::StatusOr<Blob> blob = prefetcher.Next();
          if (!blob.ok()) return blob.status();
          sink = Touch(**blob, sink);
          row.bytes += (*blob)->size();
          ++row.samples;
        }
      }
      row.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
      (*cache)->EndEpoch();
      EpochStats s = (*cache)->Stats().back();
      if (options.memory_budget_bytes > 0)
        row.mem_hit = absl::StrFormat("%.2f%%", 100 * s.memory.hit_rate());
      if (!options.disk_dir.empty())
        row.disk_hit = absl::StrFormat("%.2f%%", 100 * s.disk.hit_rate());
      row.remote_mb = s.remote_bytes / 1e6;
      row.bound_mb = ((1 - cached_fraction) * data_bytes + 0.01 * data_bytes) / 1e6;
      row.stall = s.stall_seconds;
      if (options.memory_budget_bytes > 0) row.mem_warm = s.memory.warm_seconds;
      if (!options.disk_dir.empty()) row.disk_warm = s.disk.warm_seconds;
      PrintRow(row, link);
      if ((*cache)->disk() != nullptr) {
        std::fprintf(stderr,
                     "  [%s %s epoch %d] disk: %llu entries, %llu inserts, %llu full, %llu "
                     "dropped, %llu errors\n",
                     mode.c_str(), budget.c_str(), e,
                     static_cast<unsigned long long>((*cache)->disk()->entry_count()),
                     static_cast<unsigned long long>(s.disk.inserts),
                     static_cast<unsigned long long>(s.disk.rejected_full),
                     static_cast<unsigned long long>(s.disk.write_dropped),
                     static_cast<unsigned long long>(s.disk.write_errors));
      }
    }
    return absl::OkStatus();
  };

  // Baseline 3: the prefetcher over the remote tier, nothing cached.
  if (absl::Status s = run_epochs("remote + prefetch, no cache", "0/0", DataCache::Options(), 1);
      !s.ok()) {
    return Fail(s.ToString());
  }

  // The disk tiers live in a directory made here, inside --disk_dir, and
  // only it is removed (at every exit from here on): --disk_dir itself may
  // be anything, a dataset or a home directory included. Each
  // configuration gets a fresh subdirectory, because deleting tens of
  // thousands of entries right before creating as many makes ext4's inode
  // allocator crawl (recently_deleted).
  std::string scratch;
  {
    std::error_code ec;
    std::filesystem::create_directories(disk_root, ec);
    if (ec) return Fail(absl::StrCat("cannot create --disk_dir ", disk_root, ": ", ec.message()));
    std::string pattern = disk_root + "/cache_bench.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      return Fail(absl::StrCat("cannot make a scratch directory in --disk_dir ", disk_root, ": ",
                               std::strerror(errno)));
    }
    scratch = pattern;
  }
  struct RemoveScratch {
    const std::string& path;
    ~RemoveScratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } remove_scratch{scratch};
  int config_index = 0;
  for (const Config& c : configs) {
    DataCache::Options o;
    o.memory_budget_bytes = static_cast<uint64_t>(c.memory_percent / 100 * memory_bytes);
    o.memory_policy = c.policy;
    o.memory_shards = c.policy == EvictionPolicy::kLru ? 1 : 16;
    if (c.disk_percent > 0) {
      o.disk_dir = absl::StrCat(scratch, "/config", config_index++);
      o.disk_budget_bytes = static_cast<uint64_t>(c.disk_percent / 100 * disk_bytes);
      o.disk_policy = c.policy;
      o.disk_sync = absl::GetFlag(FLAGS_disk_sync) && c.disk_sync;
    }
    std::string mode = absl::StrCat("cache ", EvictionPolicyName(c.policy));
    std::string budget = absl::StrFormat("%.0f%%/%.0f%%%s", c.memory_percent, c.disk_percent,
                                         o.disk_sync || o.disk_dir.empty() ? "" : " (no fsync)");
    if (absl::Status s = run_epochs(mode, budget, o, epochs); !s.ok()) return Fail(s.ToString());
  }
  std::printf("\n(checksum of everything read: %016llx)\n", static_cast<unsigned long long>(sink));
  return 0;
}
