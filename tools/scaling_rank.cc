// scaling_rank: one rank of tools/scaling_bench.py. Averages a synthetic
// gradient profile (--buckets buckets of --elements fp32 each) with one
// exchange, straight on the transport and the real codec:
//   --exchange=dense_ring        GlooGroup ring allreduce, then / P
//   --exchange=sparse_allgather  SparseAllgather (lib/comm/sparse_allgather.h)
//   --exchange=sparse_allreduce  SparseAllreduce (lib/comm/sparse_allreduce.h)
//   --exchange=predict           no network: prints the cost model's
//                                estimate of each exchange for --ranks
//                                ranks and --link_mbit (one JSON line)
// First (--measure_model) the library measures the cost model's figures
// (AgreeExchangeModel). Each iteration: a new gradient (untimed), a barrier, then every bucket
// in turn; its time is from the barrier to the last bucket done. Prints
// one line "RESULT {json}" with this rank's iteration times and bytes.
// Rendezvous from the environment (tools/launch.py, scaling_bench.py);
// the job secret from $GRADWIRE_JOB_SECRET.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/base/cpu_time.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "gradwire/lib/comm/session_chunk_auth.h"
#include "gradwire/lib/comm/sparse_allgather.h"
#include "gradwire/lib/comm/sparse_allreduce.h"
#include "gradwire/tools/command_line.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

ABSL_FLAG(std::string, exchange, "sparse_allreduce",
          "dense_ring, sparse_allgather, sparse_allreduce, or predict");
ABSL_FLAG(std::string, compression, "topk:ratio=0.01", "codec spec of the sparse exchanges");
ABSL_FLAG(int64_t, elements, 1 << 20, "fp32 elements per bucket");
ABSL_FLAG(int, buckets, 2, "buckets per iteration");
ABSL_FLAG(int, iters, 5, "timed iterations");
ABSL_FLAG(int, warmup, 1, "untimed iterations first");
ABSL_FLAG(std::string, bind_address, "", "numeric address to bind (the emulated host's)");
ABSL_FLAG(int, timeout_ms, 120000, "deadline of every collective");
ABSL_FLAG(int, event_loop_nice, 0, "GroupOptions::event_loop_nice (ranks sharing cores)");
ABSL_FLAG(int, receive_window, gradwire::transport::GroupOptions().receive_window,
          "GroupOptions::receive_window: peers sending into a rank at once (0: all)");
ABSL_FLAG(int, ranks, 4, "predict: ranks");
ABSL_FLAG(double, link_mbit, 100, "predict: link rate in Mbit/s");
ABSL_FLAG(double, round_us, 200, "predict: seconds per message step, in us");
ABSL_FLAG(bool, measure_model, true,
          "measure the cost model's link and codec figures first (AgreeExchangeModel), "
          "reported as \"model\" in RESULT for the planner's validation");

namespace gradwire {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "scaling_rank: %s\n", s.ToString().c_str());
  return 1;
}

// Roughly normal values, different for every (rank, step, bucket).
void FillGradient(int rank, int step, int bucket, std::vector<float>* g) {
  uint64_t x = (rank + 1) * 0x9E3779B97F4A7C15ull ^ (step + 1) * 0xD1B54A32D192ED03ull ^
               (bucket + 1) * 0x8CB92BA72F3D8DD7ull;
  for (float& v : *g) {
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      s += static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f;
    }
    v = s * 1.7f;
  }
}

// The run's sizes and counts, each in its range: a negative count once
// became a vector of 2^64 elements (abort), and zero iterations a result
// of zeros that read as a measurement.
absl::Status CheckFlags() {
  const int64_t elements = absl::GetFlag(FLAGS_elements);
  if (elements < 1 || elements > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--elements must be in 1..2^32 (fp32 per bucket), got ", elements));
  }
  // Upper bounds too: warmup + iters must not overflow an int, a model of
  // 2^30 ranks or more is no cluster, and every bucket is allocated.
  const struct {
    const char* flag;
    int value, least, most;
  } counts[] = {{"--buckets", absl::GetFlag(FLAGS_buckets), 1, 1 << 16},
                {"--iters", absl::GetFlag(FLAGS_iters), 1, 1000000},
                {"--warmup", absl::GetFlag(FLAGS_warmup), 0, 1000000},
                {"--ranks", absl::GetFlag(FLAGS_ranks), 1, 1 << 20}};
  for (const auto& c : counts) {
    if (c.value < c.least || c.value > c.most) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.flag, " must be in ", c.least, "..", c.most, ", got ", c.value));
    }
  }
  if (static_cast<uint64_t>(elements) * static_cast<uint64_t>(absl::GetFlag(FLAGS_buckets)) >
      (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--elements x --buckets must be at most 2^32 floats, got ", elements, " x ",
                     absl::GetFlag(FLAGS_buckets)));
  }
  // Rates and times whose predictions print as finite numbers.
  const double link = absl::GetFlag(FLAGS_link_mbit), round = absl::GetFlag(FLAGS_round_us);
  if (!(link >= 1e-3) || !(link <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link_mbit must be a rate in [0.001, 1e9] Mbit/s, got ", link));
  }
  if (!(round >= 0) || !(round <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--round_us must be a time in [0, 1e9] us, got ", round));
  }
  return absl::OkStatus();
}

int Predict(const CompressionSpec& spec) {
  ExchangeModel model;
  model.bytes_per_second = absl::GetFlag(FLAGS_link_mbit) * 1e6 / 8;
  model.seconds_per_round = absl::GetFlag(FLAGS_round_us) * 1e-6;
  const int p = absl::GetFlag(FLAGS_ranks);
  const uint64_t n = absl::GetFlag(FLAGS_elements);
  const int buckets = absl::GetFlag(FLAGS_buckets);
  std::vector<std::string> parts;
  for (ExchangeKind kind :
       {ExchangeKind::kDenseRing, ExchangeKind::kSparseAllgather, ExchangeKind::kSparseAllreduce}) {
    const ExchangeCost c = EstimateExchange(kind, p, n, spec, model);
    parts.push_back(absl::StrFormat(
        "\"%s\": {\"ms\": %.3f, \"wire_ms\": %.3f, \"bytes_sent\": %.0f, "
        "\"bytes_received\": %.0f, \"rounds\": %.0f}",
        ExchangeKindName(kind), buckets * c.seconds() * 1e3, buckets * c.wire_seconds * 1e3,
        buckets * c.bytes_sent, buckets * c.bytes_received, c.rounds));
  }
  std::printf("PREDICT {%s, \"choice\": \"%s\"}\n", absl::StrJoin(parts, ", ").c_str(),
              ExchangeKindName(ChooseExchange(p, n, spec, model)));
  return 0;
}

int Main() {
  if (absl::Status s = CheckFlags(); !s.ok()) return Fail(s);
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(absl::GetFlag(FLAGS_compression));
  if (!spec.ok()) return Fail(spec.status());
  const std::string exchange = absl::GetFlag(FLAGS_exchange);
  if (exchange == "predict") return Predict(*spec);
  if (exchange != "dense_ring" && exchange != "sparse_allgather" &&
      exchange != "sparse_allreduce") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unknown --exchange=", exchange)));
  }
  transport::RendezvousConfig explicit_config;
  explicit_config.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  auto config = transport::ConfigFromEnvironment(explicit_config);
  if (!config.ok()) return Fail(config.status());
  auto store = transport::RendezvousStore::Open(*config);
  if (!store.ok()) return Fail(store.status());
  transport::GroupOptions options;
  options.bind_address =
      absl::GetFlag(FLAGS_bind_address).empty() ? "127.0.0.1" : absl::GetFlag(FLAGS_bind_address);
  options.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.event_loop_nice = absl::GetFlag(FLAGS_event_loop_nice);
  options.receive_window = absl::GetFlag(FLAGS_receive_window);
  if (options.receive_window < 0)
    return Fail(absl::InvalidArgumentError("--receive_window must be >= 0"));
  auto group = transport::GlooGroup::Create(config->rank, config->world_size,
                                            (*store)->Scoped("scaling"), options);
  if (!group.ok()) return Fail(group.status());
  absl::StatusOr<JobSecret> secret = JobSecret::Resolve("", "");
  if (!secret.ok()) return Fail(secret.status());
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(*secret, config->job_id);
  if (!auth.ok()) return Fail(auth.status());
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(spec->ForSender(config->rank));
  if (!codec.ok()) return Fail(codec.status());
  ErrorFeedback ef(**codec);
  transport::GlooGroup& g = **group;
  // Frames signed as a Communicator signs them: the session's GMAC.
  absl::StatusOr<SessionAuth> session = AgreeSessionAuth(g, *auth);
  if (!session.ok()) return Fail(session.status());
  SparseAllgather allgather(**codec, *session->frames);
  SparseAllreduce allreduce(**codec, *session->frames);

  // The library's own measurement of this run's link, round latency and
  // codec (what a Communicator with measure_exchange_model agrees on).
  std::string model_json = "null";
  if (absl::GetFlag(FLAGS_measure_model)) {
    absl::StatusOr<ExchangeModel> m = AgreeExchangeModel(g, ExchangeModel(), true, codec->get());
    if (!m.ok()) return Fail(m.status());
    model_json = ExchangeModelJson(*m);
  }
  const int buckets = absl::GetFlag(FLAGS_buckets);
  const int iters = absl::GetFlag(FLAGS_iters), warmup = absl::GetFlag(FLAGS_warmup);
  const float p = static_cast<float>(g.size());
  std::vector<std::vector<float>> data(buckets, std::vector<float>(absl::GetFlag(FLAGS_elements)));
  std::vector<double> iter_ms, iter_wire_ms, iter_sync_ms;
  double cpu_seconds = 0;  // the process's CPU time over the timed iterations
  uint64_t sent = 0, received = 0;
  ExchangeStats stats;
  for (int it = 0; it < warmup + iters; ++it) {
    for (int b = 0; b < buckets; ++b) FillGradient(g.rank(), it, b, &data[b]);
    if (absl::Status s = g.Barrier(); !s.ok()) return Fail(s);
    const transport::TransferTotals before = g.totals();
    ExchangeStats step;
    const double cpu0 = ProcessCpuSeconds();
    const absl::Time t0 = absl::Now();
    for (int b = 0; b < buckets; ++b) {
      absl::Span<float> d = absl::MakeSpan(data[b]);
      absl::Status s;
      if (exchange == "dense_ring") {
        s = g.AllreduceSum(d, transport::AllreduceAlgorithm::kRing);
        for (float& v : d) v /= p;
      } else if (exchange == "sparse_allgather") {
        s = allgather.Run(g, ef, absl::StrCat(b), b, it, d, d, p, &step);
      } else {
        s = allreduce.Run(g, ef, absl::StrCat(b), b, it, d, d, p, &step);
      }
      if (!s.ok()) return Fail(s);
    }
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    const double cpu = ProcessCpuSeconds() - cpu0;
    if (it < warmup) continue;
    iter_ms.push_back(ms);
    iter_wire_ms.push_back(absl::ToDoubleMilliseconds(step.wire_time));
    iter_sync_ms.push_back(absl::ToDoubleMilliseconds(step.sync_time));
    cpu_seconds += cpu;
    sent += g.totals().bytes_sent - before.bytes_sent;
    received += g.totals().bytes_received - before.bytes_received;
    stats.Add(step);
  }
  if (absl::Status s = g.Close(); !s.ok()) return Fail(s);
  auto list = [](const std::vector<double>& ms) {
    return absl::StrJoin(ms, ", ",
                         [](std::string* out, double v) { absl::StrAppendFormat(out, "%.3f", v); });
  };
  std::printf(
      "RESULT {\"rank\": %d, \"world\": %d, \"exchange\": \"%s\", \"spec\": \"%s\", "
      "\"iter_ms\": [%s], \"wire_ms_iters\": [%s], \"sync_ms_iters\": [%s], "
      "\"bytes_sent_per_iter\": %.0f, \"bytes_received_per_iter\": %.0f, "
      "\"compress_ms_per_iter\": %.3f, \"auth_ms_per_iter\": %.3f, \"wire_ms_per_iter\": %.3f, "
      "\"sync_ms_per_iter\": %.3f, \"cpu_ms_per_iter\": %.3f, "
      "\"selection_rounds\": %d, \"model\": %s}\n",
      g.rank(), g.size(), exchange.c_str(), spec->ToString().c_str(), list(iter_ms).c_str(),
      list(iter_wire_ms).c_str(), list(iter_sync_ms).c_str(), static_cast<double>(sent) / iters,
      static_cast<double>(received) / iters,
      absl::ToDoubleMilliseconds(stats.compress_time) / iters,
      absl::ToDoubleMilliseconds(stats.auth_time) / iters,
      absl::ToDoubleMilliseconds(stats.wire_time) / iters,
      absl::ToDoubleMilliseconds(stats.sync_time) / iters, 1e3 * cpu_seconds / iters,
      allreduce.last_run().selection_rounds, model_json.c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "scaling_rank", &exit_code))
    return exit_code;
  return gradwire::Main();
}
