// CPU codec throughput at n = 1M and 25.6M (ResNet-50's parameter count).
//
//   bazel run -c opt //bench:codec_bench -- --benchmark_min_time=0.2
//       [--summary_json=PATH] [--cold] [--authenticated]
//
// Every benchmark reports bytes/s over the dense gradient (4n bytes) and
// `vs_memcpy`: a memcpy of the same bytes, timed in this process and in
// the same cache regime, divided by the benchmark's time (1.0 = as fast
// as copying its data once); with --cold each call is paired with a copy
// timed right after it and the figure is the pairs' median (CallTimer). The same
// bytes are the larger of what the call reads as its input and what it
// writes as its output: the gradient (4n) for an encode, the frames or the
// dense output (4n), whichever is more, for a decode. Both sides use the
// thread's CPU time (CopySeconds), so that a machine shared with other
// jobs skews them less than wall time. Two cache regimes: by default the
// steady state of calls back to back (at n = 1M the copy's 8 MB stay in
// the last-level cache); with --cold, every timed call starts from evicted
// caches (the data in memory, as a training step finds a bucket).
// Encode benchmarks run with error feedback, i.e. the fused
// kernel reads grad and residual and writes the residual, and reuse one
// CodecScratch across calls (as ErrorFeedback does in training).
// DecodeAverage4 averages four ranks' frames of one step, as each rank
// does after the allgather. BM_TopKSelect pits exact top-k selection
// against std::nth_element on the magnitudes at k = 0.1% n and reports
// `speedup_vs_nth_element` from both timed here.
//
// At the end a table gives, per codec and size, the encode (with error
// feedback) and decode-average vs_memcpy (the median over repetitions,
// with --benchmark_repetitions); --summary_json=PATH also writes it as
// JSON. Run pinned to one core (taskset -c 1) for the one-core figures.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gradwire/base/cpu_time.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"

namespace gradwire {
namespace {

constexpr int64_t kSmall = 1 << 20;
constexpr int64_t kResNet50 = 25600000;

// One heavy-tailed gradient per size, generated once (it takes longer
// than most benchmarks).
const std::vector<float>& Gradient(int64_t n) {
  static std::map<int64_t, std::vector<float>>* cache = new std::map<int64_t, std::vector<float>>;
  auto it = cache->find(n);
  if (it != cache->end()) return it->second;
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> normal;
  std::vector<float> g(n);
  // Per-"layer" scales spread over three decades, Student-t-like tails.
  const int64_t layer = 65536;
  for (int64_t start = 0; start < n; start += layer) {
    const float scale = std::pow(10.0f, -3.0f + 3.0f * static_cast<float>(rng() % 1000) / 1000);
    for (int64_t i = start; i < std::min(n, start + layer); ++i) {
      const float z = normal(rng);
      g[i] = scale * normal(rng) / std::sqrt(0.2f + z * z);
    }
  }
  return cache->emplace(n, std::move(g)).first->second;
}

// Seconds (thread CPU time) to memcpy the given buffers, one after the
// other, into a scratch buffer: the baseline a benchmark of the same bytes
// is divided by. Timed anew for every benchmark, next to it, in the same
// steady state as the benchmark's own loop: the copy runs back to back for
// at least kMemcpyLoopSeconds (after one untimed copy), five times; the
// result is the median of the five loops' time per copy. (Five single
// copies, as before, put the baseline of a 4 MB copy anywhere in
// 0.24-0.67 ms from run to run while the codecs' times moved by 2 %: the
// 1M rows' ratios flipped across the bar on the baseline alone.)
constexpr double kMemcpyLoopSeconds = 0.02;

// --cold: every timed call, the codec's and the memcpy's alike, starts
// with the caches holding none of its data (EvictCaches before it,
// untimed), as a bucket a training step encodes long after backprop wrote
// it, or decodes from frames just received. Default: the steady state of
// a loop over the same buffers, as Google Benchmark runs it.
bool g_cold = false;

// --authenticated: DecodeAverage4 decodes as the exchanges do, frames whose
// MACs they verified first (FrameIntegrity::kVerifiedByCaller: no checksum
// pass; the MACs' own cost is not in it). Default: the checksum verified.
bool g_authenticated = false;

// Reads a buffer of twice the last-level cache (64 MiB where sysconf
// reports none), one load per line, so that what the caches held before
// is evicted (and written back if dirty) before the next timed call.
void EvictCaches() {
  static std::vector<uint8_t>* junk = [] {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const size_t bytes = llc > 0 ? 2 * static_cast<size_t>(llc) : size_t{64} << 20;
    return new std::vector<uint8_t>(bytes, 1);
  }();
  uint64_t sum = 0;
  for (size_t i = 0; i < junk->size(); i += 64) sum += (*junk)[i];
  benchmark::DoNotOptimize(sum);
}

// Seconds (thread CPU time) of one copy of `sources`, one after the
// other, into a scratch buffer (kept between calls: its pages are not
// faulted in again).
double CopySeconds(const std::vector<absl::Span<const uint8_t>>& sources) {
  static std::vector<uint8_t>* scratch = new std::vector<uint8_t>;
  size_t total = 0;
  for (const auto& s : sources) total += s.size();
  if (scratch->size() < total) scratch->resize(total, 1);
  const double t0 = ThreadCpuSeconds();
  uint8_t* out = scratch->data();
  for (const auto& s : sources) {
    std::memcpy(out, s.data(), s.size());
    out += s.size();
  }
  benchmark::DoNotOptimize(scratch->data());
  benchmark::ClobberMemory();
  return ThreadCpuSeconds() - t0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MemcpySeconds(const std::vector<absl::Span<const uint8_t>>& sources) {
  // Seconds per copy: in --cold, 15 copies each from evicted caches (as
  // each timed call there); else 5 loops after one untimed copy.
  std::vector<double> per_copy;
  if (g_cold) {
    for (int rep = 0; rep < 15; ++rep) {
      EvictCaches();
      per_copy.push_back(CopySeconds(sources));
    }
  } else {
    CopySeconds(sources);
    for (int rep = 0; rep < 5; ++rep) {
      int copies = 0;
      double elapsed = 0;
      do {
        elapsed += CopySeconds(sources);
        ++copies;
      } while (elapsed < kMemcpyLoopSeconds);
      per_copy.push_back(elapsed / copies);
    }
  }
  return Median(per_copy);
}

absl::Span<const uint8_t> Bytes(const std::vector<float>& v) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), 4 * v.size());
}

// The same bytes as a call that reads `inputs` and writes 4n bytes of
// gradient (or reads the gradient and writes less): whichever is more.
std::vector<absl::Span<const uint8_t>> SameBytes(
    int64_t n, const std::vector<absl::Span<const uint8_t>>& inputs) {
  size_t in = 0;
  for (const auto& s : inputs) in += s.size();
  if (in > static_cast<size_t>(4 * n)) return inputs;
  return {Bytes(Gradient(n))};
}

// Bytes processed, and under `counter` the copies timed after the loop
// (MemcpySeconds) against `seconds_per_iter`.
void ReportVsMemcpy(benchmark::State& state, int64_t n, double seconds_per_iter,
                    const std::vector<absl::Span<const uint8_t>>& same_bytes,
                    const char* counter = "vs_memcpy") {
  state.SetBytesProcessed(state.iterations() * 4 * n);
  state.counters[counter] = MemcpySeconds(same_bytes) / seconds_per_iter;
}

// The timed calls of one codec benchmark, and its vs_memcpy. With --cold
// every call is paired with a copy of the same bytes timed right after it
// (each from evicted caches, the copy with the benchmark's timer paused),
// and vs_memcpy is the median over the pairs of copy time / call time: a
// pair sees the machine in the same second, so memory bandwidth that
// drifts from second to second (a shared VM's neighbours) moves both of
// its halves alike. vs_memcpy_apart is the figure as it was before the
// pairing, the mean call against the median of 15 copies timed after the
// loop, kept beside it. Without --cold (calls back to back, in cache: a
// copy between them would evict what the next call finds) the copies are
// timed after the loop (MemcpySeconds), against the mean call.
class CallTimer {
 public:
  CallTimer(benchmark::State& state, int64_t n, std::vector<absl::Span<const uint8_t>> same_bytes)
      : state_(state), n_(n), same_bytes_(std::move(same_bytes)) {}

  // One benchmark iteration: `call` timed in the thread's CPU time.
  template <typename Call>
  void Time(Call&& call) {
    if (g_cold) {
      state_.PauseTiming();
      EvictCaches();
      state_.ResumeTiming();
    }
    const double t0 = ThreadCpuSeconds();
    call();
    const double seconds = ThreadCpuSeconds() - t0;
    total_ += seconds;
    if (g_cold && seconds > 0) {
      state_.PauseTiming();
      EvictCaches();
      ratios_.push_back(CopySeconds(same_bytes_) / seconds);
      state_.ResumeTiming();
    }
  }

  // Bytes processed, vs_memcpy (and with --cold vs_memcpy_apart).
  void Report() {
    const bool paired = g_cold && !ratios_.empty();
    ReportVsMemcpy(state_, n_, total_ / std::max<int64_t>(1, state_.iterations()), same_bytes_,
                   paired ? "vs_memcpy_apart" : "vs_memcpy");
    if (paired) state_.counters["vs_memcpy"] = Median(ratios_);
  }

 private:
  benchmark::State& state_;
  const int64_t n_;
  const std::vector<absl::Span<const uint8_t>> same_bytes_;
  double total_ = 0;
  std::vector<double> ratios_;
};

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float>& src = Gradient(n);
  std::vector<float> dst(n, 1.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), 4 * n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 4 * n);
}
BENCHMARK(BM_Memcpy)->Arg(kSmall)->Arg(kResNet50)->Unit(benchmark::kMillisecond)->UseRealTime();

std::unique_ptr<Codec> MakeOrDie(const std::string& text) {
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
  if (!spec.ok()) std::abort();
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(*spec);
  if (!codec.ok()) std::abort();
  return std::move(*codec);
}

void EncodeBench(benchmark::State& state, const std::string& spec) {
  const int64_t n = state.range(0);
  std::unique_ptr<Codec> codec = MakeOrDie(spec);
  const std::vector<float>& grad = Gradient(n);
  std::vector<float> residual(n, 0.0f);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(n));
  size_t frame_bytes = 0;
  // One scratch for all calls, as ErrorFeedback keeps one: the timed
  // encodes run with it allocated, not with a fresh allocation's page
  // faults.
  CodecScratch scratch;
  // One untimed call first: the scratch's pages are faulted in.
  if (!codec->Encode(grad, 0, absl::MakeSpan(residual), absl::MakeSpan(frame), &scratch).ok()) {
    state.SkipWithError("encode failed");
    return;
  }
  CallTimer timer(state, n, SameBytes(n, {}));
  for (auto _ : state) {
    absl::StatusOr<EncodeStats> stats = absl::InternalError("not run");
    timer.Time([&] {
      stats = codec->Encode(grad, 0, absl::MakeSpan(residual), absl::MakeSpan(frame), &scratch);
    });
    if (!stats.ok()) {
      state.SkipWithError(std::string(stats.status().message()).c_str());
      return;
    }
    frame_bytes = stats->frame_bytes;
  }
  timer.Report();
  state.counters["frame_MB"] = frame_bytes / 1e6;
  state.counters["ratio"] = 4.0 * n / frame_bytes;
}

void DecodeBench(benchmark::State& state, const std::string& spec) {
  const int64_t n = state.range(0);
  std::unique_ptr<Codec> codec = MakeOrDie(spec);
  const std::vector<float>& grad = Gradient(n);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> stats = codec->Encode(grad, 0, {}, absl::MakeSpan(frame));
  if (!stats.ok()) {
    state.SkipWithError("encode failed");
    return;
  }
  frame.resize(stats->frame_bytes);
  std::vector<float> dense(n, 0.0f);
  CallTimer timer(state, n, SameBytes(n, {absl::MakeConstSpan(frame)}));
  for (auto _ : state) {
    absl::Status s;
    timer.Time([&] { s = codec->DecodeAccumulate(frame, absl::MakeSpan(dense)); });
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  timer.Report();
}

// What each rank runs per bucket after the allgather: P = 4 frames of one
// step (from four different gradients, as four ranks would send) decoded,
// summed and divided by 4 into one dense output (DecodeAverageWith).
void DecodeAverageBench(benchmark::State& state, const std::string& spec) {
  const int64_t n = state.range(0);
  constexpr int kRanks = 4;
  std::unique_ptr<Codec> codec = MakeOrDie(spec);
  const std::vector<float>& grad = Gradient(n);
  std::vector<std::vector<uint8_t>> frames(kRanks);
  std::vector<absl::Span<const uint8_t>> views;
  std::vector<float> shifted(n);
  for (int r = 0; r < kRanks; ++r) {
    // Rank r's gradient: the shared one rotated, so selections overlap
    // only partly (as different ranks' top-k do).
    std::rotate_copy(grad.begin(), grad.begin() + (n / kRanks) * r, grad.end(), shifted.begin());
    frames[r].resize(codec->MaxEncodedBytes(n));
    absl::StatusOr<EncodeStats> stats =
        codec->Encode(shifted, /*step=*/0, {}, absl::MakeSpan(frames[r]));
    if (!stats.ok()) {
      state.SkipWithError("encode failed");
      return;
    }
    frames[r].resize(stats->frame_bytes);
  }
  for (const auto& f : frames) views.push_back(f);
  std::vector<float> dense(n, 1.0f);
  CodecScratch scratch;
  size_t bad = 0;
  // One untimed call first: the scratch's pages are faulted in.
  if (!codec->DecodeAverage(views, kRanks, absl::MakeSpan(dense), &scratch, &bad).ok()) {
    state.SkipWithError("decode failed");
    return;
  }
  CallTimer timer(state, n, SameBytes(n, {views.begin(), views.end()}));
  for (auto _ : state) {
    absl::Status s;
    timer.Time([&] {
      s = codec->DecodeAverage(
          views, kRanks, absl::MakeSpan(dense), &scratch, &bad, nullptr,
          g_authenticated ? FrameIntegrity::kVerifiedByCaller : FrameIntegrity::kChecksum);
    });
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(dense.data());
  }
  timer.Report();
}

// Exact top-k selection alone (no error feedback, fp32 values) against
// std::nth_element on a copy of |g|, both at k = 0.1% n.
void BM_TopKSelect(benchmark::State& state) {
  const int64_t n = state.range(0);
  const uint64_t k = std::max<uint64_t>(1, n / 1000);
  const std::vector<float>& grad = Gradient(n);
  uint64_t temp_bytes = 0;
  kernels::cpu::TopKCompress(nullptr, &temp_bytes, nullptr, nullptr, n, k,
                             kernels::ValueFormat::kFp32, nullptr, nullptr, nullptr);
  std::unique_ptr<uint8_t[]> temp(new uint8_t[temp_bytes]);
  std::vector<uint32_t> indices(k);
  std::vector<uint8_t> values(4 * k);
  const double t0 = ThreadCpuSeconds();
  for (auto _ : state) {
    kernels::cpu::TopKCompress(temp.get(), &temp_bytes, grad.data(), nullptr, n, k,
                               kernels::ValueFormat::kFp32, indices.data(), values.data(), nullptr);
    benchmark::DoNotOptimize(indices.data());
  }
  const double ours = (ThreadCpuSeconds() - t0) / state.iterations();
  // The baseline, timed here: best of 3 (magnitudes, then nth_element),
  // against our mean.
  std::vector<float> mag(n);
  double nth = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const double t1 = ThreadCpuSeconds();
    for (int64_t i = 0; i < n; ++i) mag[i] = std::fabs(grad[i]);
    std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<float>());
    benchmark::DoNotOptimize(mag.data());
    nth = std::min(nth, ThreadCpuSeconds() - t1);
  }
  ReportVsMemcpy(state, n, ours, SameBytes(n, {}));
  state.counters["nth_element_ms"] = nth * 1e3;
  state.counters["speedup_vs_nth_element"] = nth / ours;
}
BENCHMARK(BM_TopKSelect)->Arg(kSmall)->Arg(kResNet50)->Unit(benchmark::kMillisecond)->UseRealTime();

// One benchmark per spec, at both sizes.
void RegisterEach(const std::string& prefix, void (*fn)(benchmark::State&, const std::string&),
                  const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    benchmark::RegisterBenchmark((prefix + spec).c_str(), fn, spec)
        ->Arg(kSmall)
        ->Arg(kResNet50)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

void RegisterCodecBenchmarks() {
  std::vector<std::string> sparse;
  for (const char* method : {"topk", "approx_topk", "randomk"}) {
    for (const char* density : {"0.001", "0.01", "0.1"}) {
      sparse.push_back(std::string(method) + ":ratio=" + density);
    }
  }
  std::vector<std::string> specs = sparse;
  specs.push_back("topk:ratio=0.01,values=fp16,indices=varint");
  // QSGD at 6 bits stands for the widths whose codes cross bytes (3, 5,
  // 6, 7), which decode by a path of their own.
  for (const char* s :
       {"qsgd:bits=2,bucket=512", "qsgd:bits=4,bucket=512", "qsgd:bits=6,bucket=512",
        "qsgd:bits=8,bucket=512", "sign:bucket=512", "fp16", "bf16", "none"}) {
    specs.push_back(s);
  }
  RegisterEach("Encode/", EncodeBench, specs);
  std::vector<std::string> averaged = specs;
  averaged.push_back("topk:ratio=0.01,indices=raw");
  averaged.push_back("approx_topk:ratio=0.001,indices=raw");
  RegisterEach("DecodeAverage4/", DecodeAverageBench, averaged);
  RegisterEach("DecodeAccumulate/", DecodeBench, specs);
}

// Prints runs as the console reporter does and keeps each codec's
// vs_memcpy for the summary: the median aggregate when repetitions ran,
// else the one run.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  struct Ratios {
    double encode = -1;          // Encode/ (with error feedback)
    double decode_average = -1;  // DecodeAverage4/
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      const std::string& name = run.run_name.function_name;
      const size_t slash = name.find('/');
      if (slash == std::string::npos) continue;
      const std::string kind = name.substr(0, slash), spec = name.substr(slash + 1);
      auto counter = run.counters.find("vs_memcpy");
      if (counter == run.counters.end()) continue;
      Ratios& r = ratios_[run.run_name.args][spec];
      double* slot = kind == "Encode"           ? &r.encode
                     : kind == "DecodeAverage4" ? &r.decode_average
                                                : nullptr;
      // A median replaces the single runs it summarizes.
      if (slot != nullptr && (median || *slot < 0)) *slot = counter->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // The table on stdout, and as JSON to `json_path` if not empty.
  bool Finish(const std::string& json_path) const {
    std::string json =
        std::string("{\n  \"vs_memcpy\": \"memcpy of the same bytes / codec time, one thread") +
        (g_cold ? "; the median over the calls, each paired with a copy timed right after it" : "") +
        "\",\n";
    json += std::string("  \"caches\": \"") +
            (g_cold ? "cold: every timed call after the caches were evicted"
                    : "steady state: calls back to back") +
            "\",\n";
    json += std::string("  \"frames\": \"") +
            (g_authenticated ? "authenticated: decode-average skips the checksum"
                             : "checksummed: decode-average verifies the checksum") +
            "\",\n";
    json += "  \"sizes\": {";
    bool first_size = true;
    std::printf("\nvs_memcpy (>= 0.5 wanted; caches %s%s):\n%-48s %10s %10s\n",
                g_cold ? "cold" : "steady state",
                g_authenticated ? "; frames authenticated, no checksum pass" : "", "codec / n",
                "encode+EF", "decode-avg");
    for (const auto& [n, codecs] : ratios_) {
      json += std::string(first_size ? "" : ",") + "\n    \"" + n + "\": {";
      first_size = false;
      bool first = true;
      for (const auto& [spec, r] : codecs) {
        std::printf("%-48s %10.3f %10.3f\n", (spec + " / " + n).c_str(), r.encode,
                    r.decode_average);
        char line[256];
        std::snprintf(line, sizeof line,
                      "%s\n      \"%s\": {\"encode_ef\": %.4f, "
                      "\"decode_average\": %.4f}",
                      first ? "" : ",", spec.c_str(), r.encode, r.decode_average);
        json += line;
        first = false;
      }
      json += "\n    }";
    }
    json += "\n  }\n}\n";
    if (json_path.empty()) return true;
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return false;
    }
    return true;
  }

 private:
  // n -> spec -> ratios (-1: not run).
  std::map<std::string, std::map<std::string, Ratios>> ratios_;
};

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  // --summary_json=PATH, --cold and --authenticated are ours; the rest is
  // Google Benchmark's.
  const std::string kSummaryFlag = "--summary_json=";
  std::string summary_json;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kSummaryFlag.c_str(), kSummaryFlag.size()) == 0) {
      summary_json = argv[i] + kSummaryFlag.size();
    } else if (std::strcmp(argv[i], "--cold") == 0) {
      gradwire::g_cold = true;
    } else if (std::strcmp(argv[i], "--authenticated") == 0) {
      gradwire::g_authenticated = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  gradwire::RegisterCodecBenchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  gradwire::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.Finish(summary_json) ? 0 : 1;
}
