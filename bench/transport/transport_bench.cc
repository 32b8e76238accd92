// Loopback/cluster measurement of the transport's collectives, one rank
// per process, started by tools/launch.py (or torchrun/mpirun):
//
//   python3 tools/launch.py --nproc=4 -- bazel-bin/bench/transport/transport_bench [n=25600000]
//       [reps=5] [json_out=PATH]
//
// Baseline: the ring allreduce (GlooGroup::AllreduceSum, kRing) of n fp32
// elements (default ResNet-50's 25.6M). Every other figure is printed
// with its ratio to that baseline measured in the same run:
//   - halving-doubling allreduce of the same tensor;
//   - the sparse exchange a top-k codec would do, as SparseAllgather
//     does it: the size table inside GlooGroup's agreement round, then
//     AllgathervOfGatheredTable of k (u32 index, f32 value) pairs per rank,
//     at densities 1% and 0.1% (transport only: no encode/decode);
//   - allgatherv throughput for large payloads.
// Not a Google Benchmark: the unit of work spans processes. Rank 0 prints,
// and with json_out= writes the same figures as JSON (tools read that).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace transport {
namespace {

// Median wall time of `reps` runs of `fn` (after one warm-up), in ms.
template <typename Fn>
absl::StatusOr<double> MedianMs(int reps, Fn fn) {
  std::vector<double> ms;
  for (int r = 0; r <= reps; ++r) {
    const absl::Time start = absl::Now();
    absl::Status s = fn();
    if (!s.ok()) return s;
    if (r > 0) ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Run(const std::map<std::string, std::string>& args) {
  auto arg = [&](const std::string& key, int64_t fallback) {
    int64_t v = fallback;
    auto it = args.find(key);
    if (it != args.end() && !absl::SimpleAtoi(it->second, &v)) v = fallback;
    return v;
  };
  absl::StatusOr<RendezvousConfig> config = ConfigFromEnvironment(RendezvousConfig());
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::shared_ptr<RendezvousStore>> store = RendezvousStore::Open(*config);
  absl::StatusOr<std::string> address = ResolveBindAddress(*config);
  if (!store.ok() || !address.ok()) {
    std::fprintf(stderr, "%s %s\n", store.status().ToString().c_str(),
                 address.status().ToString().c_str());
    return 2;
  }
  GroupOptions options;
  options.bind_address = *address;
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<GlooGroup>> created =
      GlooGroup::Create(config->rank, config->world_size, (*store)->Scoped("bench"), options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 2;
  }
  GlooGroup& g = **created;
  const int reps = static_cast<int>(arg("reps", 5));
  const uint64_t n = arg("n", 25600000);
  std::vector<std::string> rows;  // JSON objects, one per figure
  // `fields`: extra JSON members (",\"key\": value...") describing the figure.
  auto report = [&](const std::string& name, const absl::StatusOr<double>& ms, double baseline,
                    const std::string& extra, const std::string& fields = "") {
    if (g.rank() != 0) return;
    if (!ms.ok()) {
      std::printf("%-40s FAILED %s\n", name.c_str(), ms.status().ToString().c_str());
    } else {
      std::printf("%-40s %10.2f ms  %6.3fx dense ring  %s\n", name.c_str(), *ms,
                  baseline > 0 ? *ms / baseline : 1.0, extra.c_str());
      rows.push_back(absl::StrFormat(
          "{\"name\": \"%s\", \"ms\": %.4f, \"x_dense_ring\": %.5f, \"note\": \"%s\"%s}", name, *ms,
          baseline > 0 ? *ms / baseline : 1.0, extra, fields));
    }
    std::fflush(stdout);
  };

  std::vector<float> dense(n, 1.0f);
  absl::StatusOr<double> ring = MedianMs(
      reps, [&] { return g.AllreduceSum(absl::MakeSpan(dense), AllreduceAlgorithm::kRing); });
  if (!ring.ok()) {
    std::fprintf(stderr, "%s\n", ring.status().ToString().c_str());
    return 1;
  }
  const double base = *ring;
  if (g.rank() == 0) {
    std::printf("%d ranks, n = %llu fp32 (%.1f MB), median of %d\n", g.size(),
                static_cast<unsigned long long>(n), n * 4 / 1e6, reps);
  }
  report("allreduce ring (baseline)", ring, base,
         absl::StrCat("sent ", g.last_call().bytes_sent / 1e6, " MB/rank"));
  report("allreduce halving-doubling",
         MedianMs(reps,
                  [&] {
                    return g.AllreduceSum(absl::MakeSpan(dense),
                                          AllreduceAlgorithm::kHalvingDoubling);
                  }),
         base, "");

  for (double density : {0.01, 0.001}) {
    // k (index, value) pairs: 8 bytes each, the wire floor of top-k.
    const uint64_t k = static_cast<uint64_t>(n * density);
    std::vector<uint8_t> payload(8 * k, static_cast<uint8_t>(g.rank()));
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes(g.size());
    auto sparse_exchange = [&]() -> absl::Status {
      const uint64_t mine = payload.size();
      absl::Status s =
          g.Allgather(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&mine), sizeof(mine)),
                      absl::MakeSpan(reinterpret_cast<uint8_t*>(sizes.data()),
                                     sizeof(uint64_t) * sizes.size()));
      if (!s.ok()) return s;
      uint64_t total = 0;
      for (uint64_t b : sizes) total += b;
      out.resize(total);
      return g.AllgathervOfGatheredTable(payload, sizes, absl::MakeSpan(out));
    };
    report(absl::StrCat("sparse allgather, density ", density), MedianMs(reps, sparse_exchange),
           base, absl::StrCat("k = ", k, ", ", payload.size() / 1e6, " MB/rank"),
           absl::StrCat(", \"density\": ", density));
  }

  for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{16} << 20, uint64_t{64} << 20}) {
    std::vector<uint8_t> payload(bytes, 1);
    std::vector<uint8_t> out;
    std::vector<uint64_t> sizes;
    absl::StatusOr<double> ms =
        MedianMs(reps, [&] { return g.AllgathervBytes(payload, uint64_t{1} << 31, &out, &sizes); });
    const double received = static_cast<double>(bytes) * (g.size() - 1);
    report(absl::StrCat("allgatherv ", bytes >> 20, " MiB/rank"), ms, base,
           ms.ok() ? absl::StrCat(received / (*ms * 1e6), " GB/s received per rank") : "",
           absl::StrCat(", \"payload_bytes_per_rank\": ", bytes));
  }
  auto json_out = args.find("json_out");
  if (g.rank() == 0 && json_out != args.end()) {
    std::ofstream out(json_out->second);
    out << "{\"world_size\": " << g.size() << ", \"n\": " << n << ", \"reps\": " << reps
        << ", \"rows\": [\n  " << absl::StrJoin(rows, ",\n  ") << "\n]}\n";
    if (!out.flush()) {
      std::fprintf(stderr, "cannot write %s\n", json_out->second.c_str());
      return 1;
    }
  }
  return g.Close().ok() ? 0 : 1;
}

}  // namespace
}  // namespace transport
}  // namespace gradwire

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    args[kv[0]] = kv.size() > 1 ? kv[1] : "";
  }
  return gradwire::transport::Run(args);
}
