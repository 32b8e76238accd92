// One rank of the multi-process transport tests (driven by
// transport_test.py). Measurements live in bench/transport.
//
//   transport_rank <scenario> [key=value ...]
//
// Where the rank sits in the job comes from the environment, exactly as a
// training process would get it (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GRADWIRE_STORE_DIR or GRADWIRE_REDIS,
// GRADWIRE_REDIS_PASSWORD, GRADWIRE_JOB_ID, GRADWIRE_TIMEOUT_MS). Test
// binaries define no flags (flags live in tools/), so options are plain
// key=value arguments.
//
// Output protocol, one line each, parsed by the driver:
//   READY t_ms=<epoch ms>                       group formed
//   STATUS code=<absl code> t_ms=<epoch ms> call_ms=<ms> msg=<message>
//   CHECK <name> ok | CHECK <name> FAILED <why>
// Exit status: 0 when every check passed (or the expected error came),
// 1 on a failed check, 2 when setup failed (STATUS printed first).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/transport/bounded_block.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace transport {
namespace {

std::map<std::string, std::string> g_args;
int g_failures = 0;

int64_t Arg(const std::string& key, int64_t fallback) {
  auto it = g_args.find(key);
  int64_t v = 0;
  if (it == g_args.end() || !absl::SimpleAtoi(it->second, &v)) return fallback;
  return v;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

void Print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void PrintStatus(const absl::Status& s, absl::Duration call) {
  Print(absl::StrCat("STATUS code=", absl::StatusCodeToString(s.code()), " t_ms=", NowMs(),
                     " call_ms=", absl::ToInt64Milliseconds(call), " msg=", s.message()));
}

void Check(const std::string& name, bool ok, const std::string& why = "") {
  if (ok) {
    Print(absl::StrCat("CHECK ", name, " ok"));
  } else {
    ++g_failures;
    Print(absl::StrCat("CHECK ", name, " FAILED ", why));
  }
}

bool CheckOk(const std::string& name, const absl::Status& s) {
  Check(name, s.ok(), std::string(s.ToString()));
  return s.ok();
}

uint8_t PatternByte(int rank, uint64_t j, int iteration) {
  return static_cast<uint8_t>(rank * 31 + j * 7 + iteration * 13 + (j >> 8));
}

// Per-rank payload sizes for allgatherv iteration `it`: all zero, one
// rank only, uneven with zeros, large, then pseudo-random.
uint64_t PayloadSize(int rank, int size, int it) {
  switch (it) {
    case 0:
      return 0;
    case 1:
      return rank == 0 ? 5 : 0;
    case 2:
      return rank == 1 ? 0 : 1000 * rank + 1;
    case 3:
      return (rank % 2 == 0) ? (1 << 20) + 3 * rank : 17;
    default: {
      uint64_t x = (rank + 1) * 2654435761u + it * 40503u;
      x ^= x >> 13;
      return (x % 7 == 0) ? 0 : x % 70000;
    }
  }
}

struct Job {
  RendezvousConfig config;
  std::shared_ptr<RendezvousStore> store;
  std::unique_ptr<GlooGroup> group;
};

// Reads the environment, opens the store, forms the world group. On
// failure prints STATUS and returns null.
// This process's thread ids (/proc/self/task).
std::vector<int> ThreadIds() {
  std::vector<int> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      int tid;
      if (absl::SimpleAtoi(e->d_name, &tid)) out.push_back(tid);
    }
    closedir(d);
  }
  return out;
}

// A thread's nice value, field 19 of /proc/self/task/<tid>/stat; -100 if
// unreadable.
int ThreadNice(int tid) {
  std::ifstream in(absl::StrCat("/proc/self/task/", tid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -100;
  std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 1), ' ', absl::SkipEmpty());
  int nice;  // fields[0] is field 3 (state), so field 19 is fields[16]
  return fields.size() > 16 && absl::SimpleAtoi(fields[16], &nice) ? nice : -100;
}

std::unique_ptr<Job> Setup() {
  auto job = std::make_unique<Job>();
  const absl::Time start = absl::Now();
  absl::StatusOr<RendezvousConfig> config = ConfigFromEnvironment(RendezvousConfig());
  if (!config.ok()) {
    PrintStatus(config.status(), absl::Now() - start);
    return nullptr;
  }
  job->config = *config;
  absl::StatusOr<std::shared_ptr<RendezvousStore>> store = RendezvousStore::Open(*config);
  if (!store.ok()) {
    PrintStatus(store.status(), absl::Now() - start);
    return nullptr;
  }
  job->store = *store;
  GroupOptions options;
  // Hierarchical tests emulate several nodes on loopback, which the
  // multi-host guard would (rightly) refuse; they bind loopback directly.
  if (Arg("emulate_nodes", 0) == 0) {
    absl::StatusOr<std::string> address = ResolveBindAddress(*config);
    if (!address.ok()) {
      PrintStatus(address.status(), absl::Now() - start);
      return nullptr;
    }
    options.bind_address = *address;
  }
  options.timeout =
      absl::Milliseconds(Arg("timeout_ms", absl::ToInt64Milliseconds(config->timeout)));
  options.max_bytes_per_rank = Arg("cap", options.max_bytes_per_rank);
  // direct_max=0: the ring (ring_allgather.h) for allgatherv (the agreement round is
  // always direct).
  options.direct_allgather_max_ranks =
      static_cast<int>(Arg("direct_max", options.direct_allgather_max_ranks));
  // direct_block: largest allgatherv block sent directly (bytes).
  options.direct_allgatherv_max_block_bytes =
      Arg("direct_block", options.direct_allgatherv_max_block_bytes);
  // loop_nice: GroupOptions::event_loop_nice.
  options.event_loop_nice = static_cast<int>(Arg("loop_nice", 0));
  // window: GroupOptions::receive_window (0: every receive at once).
  options.receive_window = static_cast<int>(Arg("window", options.receive_window));
  // seg: GroupOptions::sealed_segment_bytes.
  options.sealed_segment_bytes = Arg("seg", options.sealed_segment_bytes);
  const int nice_before = ThreadNice(static_cast<int>(syscall(SYS_gettid)));
  absl::StatusOr<std::unique_ptr<GlooGroup>> group =
      GlooGroup::Create(config->rank, config->world_size, job->store->Scoped("world"), options);
  if (!group.ok()) {
    PrintStatus(group.status(), absl::Now() - start);
    return nullptr;
  }
  if (options.event_loop_nice > 0) {
    // Gloo's event-loop thread got the raised nice value; the thread that
    // created the group kept its own.
    const int want = std::min(19, nice_before + options.event_loop_nice);
    std::vector<std::string> seen;
    bool found = false;
    for (int tid : ThreadIds()) {
      const int nice = ThreadNice(tid);
      seen.push_back(absl::StrCat(tid, ":", nice));
      found = found || nice == want;
    }
    Check("event_loop_thread_niced", found,
          absl::StrCat("want a thread at nice ", want, "; threads ", absl::StrJoin(seen, " ")));
    const int nice_after = ThreadNice(static_cast<int>(syscall(SYS_gettid)));
    Check("creating_thread_keeps_its_nice", nice_after == nice_before,
          absl::StrCat(nice_before, " before, ", nice_after, " after"));
  }
  job->group = std::move(*group);
  Print(absl::StrCat("READY t_ms=", NowMs(),
                     " rendezvous_ms=", absl::ToInt64Milliseconds(absl::Now() - start)));
  return job;
}

void RunAllgatherv(GlooGroup& g) {
  const int iterations = static_cast<int>(Arg("iters", 12));
  for (int it = 0; it < iterations; ++it) {
    std::vector<uint8_t> mine(PayloadSize(g.rank(), g.size(), it));
    for (uint64_t j = 0; j < mine.size(); ++j) mine[j] = PatternByte(g.rank(), j, it);
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes;
    const std::string name = absl::StrCat("allgatherv_iter", it);
    if (!CheckOk(name, g.AllgathervBytes(mine, uint64_t{1} << 30, &out, &sizes))) return;
    std::vector<uint8_t> expected;
    for (int r = 0; r < g.size(); ++r) {
      const uint64_t n = PayloadSize(r, g.size(), it);
      Check(name + "_size", sizes[r] == n, absl::StrCat("rank ", r, " size ", sizes[r]));
      for (uint64_t j = 0; j < n; ++j) expected.push_back(PatternByte(r, j, it));
    }
    Check(name + "_bytes", out == expected,
          absl::StrCat("got ", out.size(), " bytes, expected ", expected.size()));
  }
  // Equal-size allgather, including zero bytes, and both sides of the
  // size up to which the data rides in the agreement round.
  for (size_t len : {size_t{0}, size_t{1}, GlooGroup::kInlineAllgatherBytes,
                     GlooGroup::kInlineAllgatherBytes + 1, size_t{4096}}) {
    std::vector<uint8_t> mine(len, static_cast<uint8_t>(g.rank() + 1));
    std::vector<uint8_t> out(len * g.size());
    const std::string name = absl::StrCat("allgather_", len);
    if (!CheckOk(name, g.Allgather(mine, absl::MakeSpan(out)))) return;
    bool ok = true;
    for (size_t i = 0; i < out.size(); ++i) ok = ok && out[i] == static_cast<uint8_t>(i / len + 1);
    Check(name + "_bytes", ok);
  }
  // The compressed exchange's pattern: a size table gathered by an
  // Allgather, then the payloads without a second agreement round.
  for (int it = 0; it < 3; ++it) {
    std::vector<uint8_t> mine(PayloadSize(g.rank(), g.size(), it));
    for (uint64_t j = 0; j < mine.size(); ++j) mine[j] = PatternByte(g.rank(), j, it);
    const uint64_t my_size = mine.size();
    std::vector<uint64_t> sizes(g.size());
    const std::string name = absl::StrCat("gathered_table_iter", it);
    if (!CheckOk(name + "_sizes",
                 g.Allgather(
                     absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&my_size), 8),
                     absl::MakeSpan(reinterpret_cast<uint8_t*>(sizes.data()), 8 * sizes.size())))) {
      return;
    }
    std::vector<uint8_t> out(std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
    if (!CheckOk(name, g.AllgathervOfGatheredTable(mine, sizes, absl::MakeSpan(out)))) return;
    std::vector<uint8_t> expected;
    for (int r = 0; r < g.size(); ++r) {
      for (uint64_t j = 0; j < PayloadSize(r, g.size(), it); ++j) {
        expected.push_back(PatternByte(r, j, it));
      }
    }
    Check(name + "_bytes", out == expected,
          absl::StrCat("got ", out.size(), " bytes, expected ", expected.size()));
  }
  // Bounded blocks (AllgathervBounded): no size table; each rank's block
  // of its own length, the header included, under one capacity; a block
  // as long as the capacity, one of only its header, and uneven ones. The
  // bytes of a slot past its block's length are not the block's, so the
  // slots are filled with junk first: nothing may read them.
  for (int it = 0; it < 6; ++it) {
    const uint64_t capacity = it < 3 ? 300 : (1 << 20) + 64;  // direct, then the ring by default
    uint64_t len = kBoundedHeaderBytes + (PayloadSize(g.rank(), g.size(), it) % (capacity - 7));
    if (it == 1 && g.rank() == 0) len = capacity;
    if (it == 2) len = kBoundedHeaderBytes;
    std::vector<uint8_t> block(len);
    for (uint64_t j = kBoundedHeaderBytes; j < len; ++j) block[j] = PatternByte(g.rank(), j, it);
    std::vector<uint8_t> out(g.size() * capacity, 0xA5);
    std::vector<uint64_t> lengths(g.size());
    const std::string name = absl::StrCat("bounded_iter", it);
    if (!CheckOk(name, g.AllgathervBounded(absl::MakeSpan(block), capacity, absl::MakeSpan(out),
                                           absl::MakeSpan(lengths)))) {
      return;
    }
    bool ok = true;
    std::string why;
    for (int r = 0; r < g.size() && ok; ++r) {
      uint64_t want = kBoundedHeaderBytes + (PayloadSize(r, g.size(), it) % (capacity - 7));
      if (it == 1 && r == 0) want = capacity;
      if (it == 2) want = kBoundedHeaderBytes;
      const uint8_t* slot = out.data() + r * capacity;
      ok = lengths[r] == want && BoundedBlockLength(slot, capacity) == want;
      for (uint64_t j = kBoundedHeaderBytes; ok && j < want; ++j) {
        ok = slot[j] == PatternByte(r, j, it);
      }
      if (!ok) why = absl::StrCat("rank ", r, ": length ", lengths[r], ", want ", want);
    }
    Check(name + "_blocks", ok, why);
  }
  // Arguments that break the contract are refused before anything is
  // sent, and poison the group (the peers would already be sending):
  // checked last, on a group of one rank only (a peer would wait).
  if (g.size() == 1) {
    std::vector<uint8_t> block(100), out(64);
    std::vector<uint64_t> lengths(1);
    absl::Status s = g.AllgathervBounded(absl::MakeSpan(block), 64, absl::MakeSpan(out),
                                         absl::MakeSpan(lengths));
    Check("bounded_block_over_capacity_refused", absl::IsInvalidArgument(s), s.ToString());
    return;
  }
  CheckOk("barrier", g.Barrier());
  Print(absl::StrCat("STATS ", g.totals().ToString()));
}

// Integer-valued floats well below 2^24: every summation order is exact,
// so the result must equal the sum bit for bit.
float Value(int rank, uint64_t i) { return static_cast<float>((rank + 1) * ((i % 97) + 1)); }

void RunAllreduce(GlooGroup& g) {
  // The last spans several of the ring's 1 MiB segments per chunk.
  const uint64_t sizes[] = {0, 1, 7, 1000, 4099, (1 << 18) + 5, (3 << 20) + 7};
  for (AllreduceAlgorithm algo :
       {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling}) {
    const char* algo_name = algo == AllreduceAlgorithm::kRing ? "ring" : "hd";
    for (uint64_t n : sizes) {
      std::vector<float> data(n);
      // Twice on the same buffer: the second halving-doubling run reuses
      // the cached algorithm and its registered buffers.
      for (int rep = 0; rep < 2; ++rep) {
        for (uint64_t i = 0; i < n; ++i) data[i] = Value(g.rank(), i);
        const std::string name = absl::StrCat("allreduce_", algo_name, "_", n, "_rep", rep);
        if (!CheckOk(name, g.AllreduceSum(absl::MakeSpan(data), algo))) return;
        const float ranks_sum = g.size() * (g.size() + 1) / 2.0f;
        uint64_t bad = n;
        for (uint64_t i = 0; i < n && bad == n; ++i) {
          if (data[i] != ranks_sum * ((i % 97) + 1)) bad = i;
        }
        Check(name + "_exact", bad == n, absl::StrCat("first wrong element ", bad));
      }
    }
  }
  Print(absl::StrCat("STATS ", g.totals().ToString()));
}

// The hierarchical data path with dense stand-ins: reduce-scatter inside a
// node, allreduce of each shard across nodes (same local rank), allgatherv
// inside the node; the result must be the global sum.
void RunHierarchical(Job& job) {
  GlooGroup& world = *job.group;
  absl::StatusOr<std::unique_ptr<GlooGroup>> node = world.Split(job.config.node_id);
  if (!CheckOk("split_node", node.status())) return;
  absl::StatusOr<std::unique_ptr<GlooGroup>> cross = world.Split(job.config.local_rank);
  if (!CheckOk("split_cross", cross.status())) return;
  GlooGroup& in_node = **node;
  GlooGroup& across = **cross;
  Check("node_group_size", in_node.size() == job.config.local_world_size,
        absl::StrCat(in_node.size()));
  Check("cross_group_size", across.size() == job.config.world_size / job.config.local_world_size,
        absl::StrCat(across.size()));
  for (uint64_t n : {uint64_t{0}, uint64_t{5}, uint64_t{1000}, uint64_t{100003}}) {
    std::vector<float> data(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = Value(world.rank(), i);
    std::vector<uint64_t> counts(in_node.size(), n / in_node.size());
    for (uint64_t i = 0; i < n % in_node.size(); ++i) ++counts[i];
    const std::string name = absl::StrCat("hier_", n);
    if (!CheckOk(name + "_reduce_scatter", in_node.ReduceScatterSum(absl::MakeSpan(data), counts)))
      return;
    std::vector<float> shard(data.begin(), data.begin() + counts[in_node.rank()]);
    if (!CheckOk(name + "_cross_allreduce",
                 across.AllreduceSum(absl::MakeSpan(shard), AllreduceAlgorithm::kRing)))
      return;
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes;
    absl::Span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(shard.data()),
                                    shard.size() * sizeof(float));
    if (!CheckOk(name + "_node_allgatherv",
                 in_node.AllgathervBytes(bytes, uint64_t{1} << 30, &out, &sizes)))
      return;
    std::vector<float> result(n);
    if (n > 0) std::memcpy(result.data(), out.data(), n * sizeof(float));
    const float ranks_sum = world.size() * (world.size() + 1) / 2.0f;
    uint64_t bad = n;
    for (uint64_t i = 0; i < n && bad == n; ++i) {
      if (out.size() != n * sizeof(float) || result[i] != ranks_sum * ((i % 97) + 1)) bad = i;
    }
    Check(name + "_exact", bad == n, absl::StrCat("first wrong element ", bad));
  }
  CheckOk("close_node_group", in_node.Close());
  CheckOk("close_cross_group", across.Close());
}

// Collectives in a loop until one fails (a peer was killed or stopped),
// then report how the failure surfaced and that the group is poisoned.
// stop_rank=R stop_iter=I: rank R stops itself (SIGSTOP) before iteration
// I, between collectives, as a debugger or a stalled machine would stop
// it; it prints "STOPPING t_ms=<epoch ms>" first.
void RunLoop(GlooGroup& g) {
  const absl::Time limit = absl::Now() + absl::Milliseconds(Arg("loop_ms", 20000));
  std::vector<float> dense(Arg("n", 1 << 16), 1.0f);
  const int64_t stop_rank = Arg("stop_rank", -1);
  const int64_t stop_iter = Arg("stop_iter", 0);
  for (int it = 0; absl::Now() < limit; ++it) {
    if (g.rank() == stop_rank && it == stop_iter) {
      Print(absl::StrCat("STOPPING t_ms=", NowMs()));
      raise(SIGSTOP);
    }
    std::vector<uint8_t> mine(PayloadSize(g.rank(), g.size(), 4 + it));
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes;
    absl::Time start = absl::Now();
    absl::Status s = g.AllgathervBytes(mine, uint64_t{1} << 30, &out, &sizes);
    if (s.ok()) {
      start = absl::Now();
      s = g.AllreduceSum(absl::MakeSpan(dense),
                         it % 2 ? AllreduceAlgorithm::kRing : AllreduceAlgorithm::kHalvingDoubling);
    }
    if (!s.ok()) {
      PrintStatus(s, absl::Now() - start);
      absl::Status again = g.Barrier();
      Check("poisoned_after_failure",
            again.code() == absl::StatusCode::kFailedPrecondition &&
                absl::StrContains(again.message(), "poisoned by earlier failure"),
            std::string(again.ToString()));
      Check("health_reports_failure", !g.health().ok());
      return;
    }
  }
  Check("loop_saw_failure", false, "no collective failed before loop_ms");
}

// Disagreeing ranks: every rank must get "collective mismatch" naming the
// culprits, and the group must stay usable (all ranks detected it alike).
void RunMismatch(GlooGroup& g) {
  const std::string kind = g_args["kind"];
  const int culprit = g.size() - 1;
  absl::Status s;
  if (kind == "count") {
    std::vector<float> data(g.rank() == culprit ? 50 : 100, 1.0f);
    s = g.AllreduceSum(absl::MakeSpan(data), AllreduceAlgorithm::kRing);
  } else if (kind == "cap") {
    std::vector<uint8_t> mine(g.rank() == culprit ? 5000 : 100, 1);
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes;
    s = g.AllgathervBytes(mine, 4096, &out, &sizes);
  } else if (kind == "table") {
    // A stale size table on one rank: allgatherv must not post receives.
    std::vector<uint8_t> mine(10, 1);
    std::vector<uint64_t> sizes(g.size(), 10);
    if (g.rank() == 0) sizes[culprit] = 11;  // rank 0 believes culprit sends 11
    std::vector<uint8_t> out(std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
    s = g.Allgatherv(mine, sizes, absl::MakeSpan(out));
  } else if (kind == "op") {
    std::vector<float> data(100, 1.0f);
    std::vector<uint8_t> out(100 * g.size());
    s = g.rank() == culprit ? g.AllreduceSum(absl::MakeSpan(data), AllreduceAlgorithm::kRing)
                            : g.Allgather(absl::MakeSpan(out).subspan(0, 100), absl::MakeSpan(out));
  } else if (kind == "inline_length") {
    // Lengths that would ride in the agreement round still must agree.
    std::vector<uint8_t> mine(g.rank() == culprit ? 8 : 16, 1);
    std::vector<uint8_t> out(mine.size() * g.size());
    s = g.Allgather(mine, absl::MakeSpan(out));
  } else if (kind == "fingerprint") {
    s = g.ExpectSame(g.rank() == culprit ? 0xbad : 0x600d, "codec spec");
  } else {
    Check("known_kind", false, kind);
    return;
  }
  PrintStatus(s, absl::ZeroDuration());
  Check("mismatch_reported", absl::StrContains(s.message(), "collective mismatch"),
        std::string(s.ToString()));
  std::vector<float> after(64, 1.0f);
  CheckOk("usable_after_mismatch",
          g.AllreduceSum(absl::MakeSpan(after), AllreduceAlgorithm::kRing));
  Check("sum_after_mismatch", after[63] == static_cast<float>(g.size()));
}

// ------------------------------------------------------ sealed collectives

// A stand-in MAC for the sealed ring (the transport knows none): a keyed
// XXH3-64 of key | context | chunk, then 5 filler bytes (13 in all: an
// odd trailer size on purpose). Not cryptographic; it tells whether the
// ring binds what it should. `tamper`: after sealing, flip a bit of the
// chunk, as a device on the wire would.
class TestAuthenticator : public ChunkAuthenticator {
 public:
  TestAuthenticator(uint64_t key, bool tamper) : key_(key), tamper_(tamper) {}
  size_t trailer_bytes() const override { return 13; }
  absl::Status Seal(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                    uint8_t* trailer) const override {
    EncodeFixed64(trailer, Tag(context, chunk));
    std::memset(trailer + 8, 0xA5, 5);
    if (tamper_ && !chunk.empty()) const_cast<uint8_t*>(chunk.data())[chunk.size() / 2] ^= 4;
    return absl::OkStatus();
  }
  absl::Status Verify(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                      const uint8_t* trailer) const override {
    bool filler = true;
    for (int i = 8; i < 13; ++i) filler = filler && trailer[i] == 0xA5;
    if (!filler || DecodeFixed64(trailer) != Tag(context, chunk)) {
      return absl::UnauthenticatedError("test tag mismatch");
    }
    return absl::OkStatus();
  }

 private:
  uint64_t Tag(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk) const {
    std::string input;
    PutFixed64(&input, key_);
    input.append(reinterpret_cast<const char*>(context.data()), context.size());
    input.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    return Checksum64(input);
  }
  uint64_t key_;
  bool tamper_;
};

// Inexact floats: sums depend on their order, so bitwise equality with the
// reference says the ring adds in the order sealed_ring.h documents.
float Inexact(int rank, uint64_t i) {
  const uint64_t x = (rank + 3) * 2654435761u ^ (i + 1) * 40503u;
  return static_cast<float>(static_cast<int64_t>(x % 2000003) - 1000001) / 997.0f;
}

// The documented order: chunk c = ((x[c+1] + x[c+2]) + ...) + x[c].
std::vector<float> RingSum(int size, uint64_t n, const std::vector<uint64_t>& counts) {
  std::vector<float> out(n);
  uint64_t begin = 0;
  for (int c = 0; c < size; ++c) {
    for (uint64_t i = begin; i < begin + counts[c]; ++i) {
      float acc = Inexact((c + 1) % size, i);
      for (int k = 2; k <= size; ++k) acc += Inexact((c + k) % size, i);
      out[i] = acc;
    }
    begin += counts[c];
  }
  return out;
}

uint64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  for (uint64_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return a.size();
}

void RunSealed(GlooGroup& g) {
  const TestAuthenticator auth(42, false);
  const int p = g.size(), me = g.rank();
  uint32_t step = 0;
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000}, uint64_t{4099},
                     uint64_t{(1 << 18) + 5}}) {
    std::vector<uint64_t> even(p, n / p);
    for (uint64_t r = 0; r < n % p; ++r) ++even[r];
    const std::vector<float> want = RingSum(p, n, even);
    std::vector<float> data(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = Inexact(me, i);
    const std::string name = absl::StrCat("sealed_allreduce_", n);
    if (!CheckOk(name, g.SealedAllreduceSum(absl::MakeSpan(data), auth, {++step, 1, 0}))) return;
    const uint64_t bad = FirstDifference(data, want);
    Check(name + "_bitwise", bad == n, absl::StrCat("first difference at element ", bad));
    if (n > 0 && p > 1) {
      Check(name + "_auth_timed", g.last_call().auth_time > absl::ZeroDuration());
      // Every chunk but mine in the reduce-scatter, every chunk but the
      // next rank's in the allgather, each segment with its trailer.
      const uint64_t payload = (2 * n - even[me] - even[(me + 1) % p]) * sizeof(float);
      const uint64_t sent = g.last_call().bytes_sent;
      Check(name + "_bytes", sent > payload && sent < payload + payload / 4 + 1000,
            absl::StrCat(g.last_call().ToString(), "; payload ", payload));
    }

    // Uneven chunks, some empty.
    std::vector<uint64_t> counts(p, 0);
    uint64_t used = 0;
    for (int c = 0; c + 1 < p; ++c) {
      counts[c] = c % 2 == 1 ? 0 : n / (p + 1);
      used += counts[c];
    }
    counts[p - 1] = n - used;
    uint64_t begin = 0;
    for (int c = 0; c < me; ++c) begin += counts[c];
    const std::vector<float> sums = RingSum(p, n, counts);
    for (uint64_t i = 0; i < n; ++i) data[i] = Inexact(me, i);
    if (!CheckOk(name + "_reduce_scatter",
                 g.SealedReduceScatterSum(absl::MakeSpan(data), counts, auth, {++step, 2, 1}))) {
      return;
    }
    std::vector<float> expect(n);
    for (uint64_t i = 0; i < n; ++i) {
      const bool mine = i >= begin && i < begin + counts[me];
      expect[i] = mine ? sums[i] : Inexact(me, i);
    }
    const uint64_t bad_rs = FirstDifference(data, expect);
    Check(name + "_reduce_scatter_bitwise", bad_rs == n,
          absl::StrCat("first difference at element ", bad_rs));

    // Allgather: only my chunk holds data going in.
    std::vector<float> gathered(n, -1.0f);
    for (uint64_t i = begin; i < begin + counts[me]; ++i) gathered[i] = Inexact(me, i);
    if (!CheckOk(name + "_allgather",
                 g.SealedAllgather(absl::MakeSpan(gathered), counts, auth, {++step, 3, 2}))) {
      return;
    }
    std::vector<float> all(n);
    uint64_t b = 0;
    for (int c = 0; c < p; ++c) {
      for (uint64_t i = b; i < b + counts[c]; ++i) all[i] = Inexact(c, i);
      b += counts[c];
    }
    const uint64_t bad_ag = FirstDifference(gathered, all);
    Check(name + "_allgather_bitwise", bad_ag == n,
          absl::StrCat("first difference at element ", bad_ag));
  }
  // Ranks that disagree on the scope are a mismatch, found before any chunk
  // moves; the group stays usable.
  std::vector<float> data(100, 1.0f);
  const ChunkScope scope{me == p - 1 ? 8u : 7u, 5, 0};
  const absl::Status s = g.SealedAllreduceSum(absl::MakeSpan(data), auth, scope);
  if (p > 1) {
    Check("sealed_scope_mismatch",
          absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "collective mismatch") &&
              absl::StrContains(s.message(), absl::StrCat("rank ", p - 1, " passes step 8")),
          s.ToString());
  }
  CheckOk("sealed_usable_after_mismatch",
          g.SealedAllreduceSum(absl::MakeSpan(data), auth, {100, 5, 0}));
  Print(absl::StrCat("STATS ", g.totals().ToString()));
}

// One rank (culprit=) seals with another key (kind=key) or alters its
// chunks after sealing (kind=tamper). Every rank must fail; the driver
// checks who names whom.
void RunSealedForged(GlooGroup& g) {
  const bool culprit = g.rank() == Arg("culprit", 1);
  const bool tamper = g_args["kind"] == "tamper";
  const TestAuthenticator auth(culprit && !tamper ? 43 : 42, culprit && tamper);
  std::vector<float> data(Arg("n", 100000));
  for (uint64_t i = 0; i < data.size(); ++i) data[i] = Inexact(g.rank(), i);
  const absl::Time start = absl::Now();
  const absl::Status s = g.SealedAllreduceSum(absl::MakeSpan(data), auth, {1, 0, 0});
  PrintStatus(s, absl::Now() - start);
  Check("forged_exchange_fails", !s.ok(), s.ToString());
  const absl::Status again = g.Barrier();
  Check("poisoned_afterwards", absl::IsFailedPrecondition(again), again.ToString());
}

int CountOpenFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

// Re-creating a group (the way out of a poisoned one) must not leak file
// descriptors (a known complaint about Gloo front ends): build and drop
// groups under fresh store scopes and compare descriptor counts.
void RunRecreate(Job& job) {
  GroupOptions options;
  options.timeout = absl::Milliseconds(Arg("timeout_ms", 10000));
  int fds_after_first = -1;
  const int generations = static_cast<int>(Arg("generations", 8));
  for (int gen = 0; gen < generations; ++gen) {
    absl::StatusOr<std::unique_ptr<GlooGroup>> g =
        GlooGroup::Create(job.config.rank, job.config.world_size,
                          job.store->Scoped(absl::StrCat("gen", gen)), options);
    if (!CheckOk(absl::StrCat("create_gen", gen), g.status())) return;
    std::vector<float> data(1000, 1.0f);
    if (!CheckOk("allreduce",
                 (*g)->AllreduceSum(absl::MakeSpan(data), AllreduceAlgorithm::kHalvingDoubling)))
      return;
    if (!CheckOk("close", (*g)->Close())) return;
    g->reset();
    if (gen == 0) fds_after_first = CountOpenFds();
  }
  const int fds_at_end = CountOpenFds();
  Print(absl::StrCat("FDS after_first_group=", fds_after_first, " after_", generations,
                     "_groups=", fds_at_end));
  Check("no_fd_leak", fds_at_end <= fds_after_first,
        absl::StrCat(fds_after_first, " fds after the first group, ", fds_at_end, " after ",
                     generations));
}

}  // namespace
}  // namespace transport
}  // namespace gradwire

int main(int argc, char** argv) {
  using namespace gradwire::transport;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <scenario> [key=value ...]\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    g_args[kv[0]] = kv.size() > 1 ? kv[1] : "";
  }
  std::unique_ptr<Job> job = Setup();
  if (job == nullptr) return 2;
  GlooGroup& g = *job->group;
  if (scenario == "allgatherv")
    RunAllgatherv(g);
  else if (scenario == "allreduce")
    RunAllreduce(g);
  else if (scenario == "hier")
    RunHierarchical(*job);
  else if (scenario == "loop")
    RunLoop(g);
  else if (scenario == "mismatch")
    RunMismatch(g);
  else if (scenario == "recreate")
    RunRecreate(*job);
  else if (scenario == "sealed")
    RunSealed(g);
  else if (scenario == "sealed_forged")
    RunSealedForged(g);
  else if (scenario == "idle") {
    // Hold the group open (garbage-connection test probes it), then check
    // it still works.
    usleep(static_cast<useconds_t>(Arg("idle_ms", 1000)) * 1000);
    RunAllgatherv(g);
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  // Orderly teardown (see GlooGroup::Close): exiting straight after the
  // last collective can reset a peer that is still finishing it.
  if (scenario != "loop" && g.health().ok()) CheckOk("close", g.Close());
  return g_failures == 0 ? 0 : 1;
}
