// exchange_bench: times the gradient exchange of a real model's gradient
// profile through the asynchronous bucketed API, one process per rank.
//
//   export GRADWIRE_JOB_SECRET=$(openssl rand -hex 32)
//   python3 tools/launch.py --nproc=4 -- bazel-bin/tools/exchange_bench
//       --profile=resnet50 --spec=topk:ratio=0.01 [--hierarchical]
//       --iters=20 --warmup=3 --json_out=/tmp/topk.rank{rank}.json
//
// --spec is the library's compression spec string (lib/codec/
// compression_spec.h: "none", "qsgd:bits=4", "topk:ratio=0.01,values=fp16",
// ...), parsed by CompressionSpec::Parse; --hierarchical switches to the
// hierarchical (HiTopKComm) exchange, nodes from LOCAL_WORLD_SIZE.
//
// Where ranks find each other comes from the environment the launcher
// sets (torchrun / mpirun / GRADWIRE_* variables, see
// transport/rendezvous_config.h) and the --iface / --bind_address /
// --redis / --store_dir / --job_id flags, which win over it. In an
// emulated cluster give --iface (or --bind_address) of the namespace's
// interface; --emulate_nodes binds loopback for several "nodes" on one
// host (which the multi-host guard would otherwise refuse).
//
// Each iteration: reset the gradients (untimed), a barrier (--align_steps:
// emulated hosts share this machine's cores, so a rank still resetting
// would run inside its peers' timed steps), then BeginStep, Submit
// every tensor in backprop (reverse) order, Flush, WaitAll, and (with
// --align_steps, untimed) a second barrier, so the first rank done does
// not start its next reset while its peers still finish. The time of
// one iteration is from the first Submit to WaitAll returning, i.e. the
// exchange as a training step would see it with no compute to overlap.
// Inside it the exchanger pipelines buckets (--pipeline_depth): "span" is
// the step's critical path as it ran (first bucket queued to last written
// back) and "overlap" how much of the shorter of CPU stages (compress +
// auth + copy) and wire time it hid under the other.
// Every rank prints a one-line summary and, with --json_out, writes its
// results as JSON ("{rank}" in the path becomes the rank): "ok": true and
// its figures, or "ok": false and the error when it fails (exit status 1).
// Tools read those files (tools/clusterbench), never the printed lines.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/base/cpu_time.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/tools/command_line.h"
#include "gradwire/tools/model_profile.h"
#include "gradwire/tools/step_trace.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

ABSL_FLAG(std::string, spec, "topk:ratio=0.01",
          "compression spec: none, fp16, bf16, topk, approx_topk, randomk, qsgd or sign, with "
          "settings after ':', e.g. \"topk:ratio=0.01,values=fp16\" or \"qsgd:bits=4\" "
          "(lib/codec/compression_spec.h)");
ABSL_FLAG(double, bucket_size_mb, 25, "bucket fusion size in MiB of fp32 gradient");
ABSL_FLAG(int, pipeline_depth, 2,
          "flat compressed buckets in flight between encode and write-back (1: encode, exchange "
          "and decode one bucket at a time, no overlap)");
ABSL_FLAG(bool, carry_dense_tail, true,
          "the dense tail rides in the last compressed bucket's frames where the cost model "
          "predicts it faster (ExchangerOptions::carry_dense_tail)");
ABSL_FLAG(int, event_loop_nice, 0,
          "raise the nice value of Gloo's event-loop thread by this much (0..19): where ranks "
          "share cores, Gloo's loop spins while a descheduled thread holds a pair's lock "
          "(transport/gloo_group.h, GroupOptions::event_loop_nice)");
ABSL_FLAG(bool, bucket_views, true,
          "after the first step write each gradient into its bucket slot (zero-copy, like "
          "DDP's gradient_as_bucket_view, which tools/ddp_peer.py also sets); false: "
          "Submit copies in and the exchange copies out");
ABSL_FLAG(bool, align_steps, true,
          "barrier after each untimed gradient reset, so every rank's timed step starts "
          "together, and after each timed step, so no rank resets while a peer still "
          "exchanges: emulated hosts share this machine's cores, and one rank's reset "
          "would otherwise run inside its peers' timed steps");
ABSL_FLAG(bool, hierarchical, false,
          "hierarchical exchange (HiTopKComm) of compressed buckets: nodes from "
          "LOCAL_WORLD_SIZE");
ABSL_FLAG(int64_t, dense_below_elements, 16384, "tensors smaller than this go dense");
ABSL_FLAG(bool, dense_one_dimensional, true, "1-D tensors (biases, norms) go dense");
ABSL_FLAG(std::string, exchange, "auto",
          "how compressed buckets travel (CommunicatorOptions::exchange): auto (the cost model "
          "picks per bucket), dense_ring, sparse_allgather, sparse_allreduce or cast_allreduce");
ABSL_FLAG(std::string, exchange_model, "",
          "what --exchange=auto predicts with (lib/comm/exchange_model_spec.h): empty for the "
          "defaults (a 10 Gbit/s link), \"measure\" to measure this cluster first, or figures "
          "by name over the defaults, e.g. \"bytes_per_second=1.25e8,seconds_per_round=2e-4\"");
ABSL_FLAG(std::string, dense_algorithm, "ring",
          "dense allreduce: ring (halving_doubling is refused: dense chunks are authenticated, "
          "which only the sealed ring does)");
ABSL_FLAG(std::string, profile, "resnet50", "model profile name (tools/model_profiles.py)");
ABSL_FLAG(int64_t, params, 0, "synthetic profile of N floats instead of --profile");
ABSL_FLAG(std::string, profile_file, "",
          "read shapes (one \"d0xd1x...\" per line, forward order) from this file instead of "
          "running tools/model_profiles.py");
ABSL_FLAG(std::string, model_profiles, "tools/model_profiles.py", "path of model_profiles.py");
ABSL_FLAG(int, iters, 20, "timed iterations");
ABSL_FLAG(int, warmup, 3, "untimed iterations first (buffers, plan, connections)");
ABSL_FLAG(std::string, json_out, "",
          "write this rank's results (or its error) as JSON here; \"{rank}\" becomes the rank");
ABSL_FLAG(std::string, timeline_out, "",
          "write when each pipeline stage of the timed steps ran, in Chrome's trace format "
          "(chrome://tracing, Perfetto), here; \"{rank}\" becomes the rank. "
          "tools/timeline_summary.py names where a step's time went");
ABSL_FLAG(std::string, iface, "", "network interface to bind and advertise (GLOO_SOCKET_IFNAME)");
ABSL_FLAG(std::string, bind_address, "", "numeric address to bind and advertise");
ABSL_FLAG(bool, emulate_nodes, false, "bind 127.0.0.1 although LOCAL_WORLD_SIZE < WORLD_SIZE");
ABSL_FLAG(std::string, redis, "", "host:port of the rendezvous Redis (else $GRADWIRE_REDIS)");
ABSL_FLAG(std::string, store_dir, "", "shared rendezvous directory (else $GRADWIRE_STORE_DIR)");
ABSL_FLAG(std::string, job_id, "", "job id (else $GRADWIRE_JOB_ID)");
ABSL_FLAG(int64_t, timeout_ms, 60000, "deadline of every collective and wait");
ABSL_FLAG(std::string, job_secret_file, "",
          "file holding the job secret (else $GRADWIRE_JOB_SECRET)");

namespace gradwire {
namespace {

using Tensor = tools::ProfileTensor;

absl::StatusOr<std::vector<std::vector<int64_t>>> LoadShapes() {
  if (!absl::GetFlag(FLAGS_profile_file).empty()) {
    return tools::ReadProfileFile(absl::GetFlag(FLAGS_profile_file));
  }
  return tools::RunModelProfiles(absl::GetFlag(FLAGS_model_profiles), absl::GetFlag(FLAGS_profile),
                                 absl::GetFlag(FLAGS_params));
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(const transport::RendezvousConfig& config,
                                                      const CommunicatorOptions& options) {
  absl::StatusOr<JobSecret> secret = JobSecret::Resolve("", absl::GetFlag(FLAGS_job_secret_file));
  if (!secret.ok()) return secret.status();
  if (!absl::GetFlag(FLAGS_emulate_nodes)) return Communicator::Connect(config, *secret, options);
  // Emulated nodes on one host: bind loopback explicitly.
  return Communicator::ConnectAt(config, "127.0.0.1", *secret, options);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * (v.size() - 1)))];
}

double Median(const std::vector<double>& v) { return Percentile(v, 0.5); }

// CPU time of this process, all threads, user + system. Emulated hosts
// share this machine's cores, so the sum over ranks of this per step,
// against cores x step time, says whether a step is CPU-bound.
double ProcessCpuMs() { return 1e3 * ProcessCpuSeconds(); }

// A JSON string literal: quotes, backslashes and every byte outside
// printable ASCII escaped, so any error text makes a valid file.
std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

// --json_out for this rank ("{rank}" replaced), or "" without the flag.
std::string JsonPath(int rank) {
  return absl::StrReplaceAll(absl::GetFlag(FLAGS_json_out), {{"{rank}", absl::StrCat(rank)}});
}

// Writes `text` to `path` whole or not at all (a reader never sees half).
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp", getpid());
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

// Reports a failure on stderr and, with --json_out, as this rank's result.
int Fail(const absl::Status& s, int rank = -1) {
  std::fprintf(stderr, "exchange_bench: %s\n", s.ToString().c_str());
  if (!absl::GetFlag(FLAGS_json_out).empty() && rank >= 0) {
    const std::string json = absl::StrCat("{\"ok\": false, \"rank\": ", rank,
                                          ", \"error\": ", JsonQuote(s.ToString()), "}\n");
    if (absl::Status w = WriteFileAtomically(JsonPath(rank), json); !w.ok()) {
      std::fprintf(stderr, "exchange_bench: %s\n", w.ToString().c_str());
    }
  }
  return 1;
}

absl::StatusOr<transport::RendezvousConfig> ConfigFromFlags() {
  transport::RendezvousConfig explicit_config;
  explicit_config.iface = absl::GetFlag(FLAGS_iface);
  explicit_config.bind_address = absl::GetFlag(FLAGS_bind_address);
  explicit_config.store_dir = absl::GetFlag(FLAGS_store_dir);
  explicit_config.job_id = absl::GetFlag(FLAGS_job_id);
  explicit_config.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  if (!absl::GetFlag(FLAGS_redis).empty()) {
    std::vector<std::string> hp = absl::StrSplit(absl::GetFlag(FLAGS_redis), ':');
    explicit_config.redis_host = hp[0];
    if (hp[0].empty() || hp.size() > 2 ||
        (hp.size() > 1 && !absl::SimpleAtoi(hp[1], &explicit_config.redis_port))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--redis must be host[:port], got \"", absl::GetFlag(FLAGS_redis), "\""));
    }
  }
  return transport::ConfigFromEnvironment(explicit_config);
}

// The run's counts and sizes, each in its range, before anything runs:
// --iters=0 once printed a median of 0 ms as if measured, and a negative
// or NaN --bucket_size_mb reached a float-to-integer conversion whose
// result is undefined.
absl::Status CheckRunFlags() {
  // (Each at most a million, so that warmup + iters cannot overflow.)
  if (absl::GetFlag(FLAGS_iters) < 1 || absl::GetFlag(FLAGS_iters) > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--iters must be in 1..1000000, got ", absl::GetFlag(FLAGS_iters)));
  }
  if (absl::GetFlag(FLAGS_warmup) < 0 || absl::GetFlag(FLAGS_warmup) > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup must be in 0..1000000, got ", absl::GetFlag(FLAGS_warmup)));
  }
  // Up to 2^40 bytes: beyond any gradient, and exact as an integer.
  const double mb = absl::GetFlag(FLAGS_bucket_size_mb);
  if (!(mb > 0) || mb > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_size_mb must be in (0, 2^20] MiB, got ", mb));
  }
  if (absl::GetFlag(FLAGS_params) < 0 || absl::GetFlag(FLAGS_dense_below_elements) < 0) {
    return absl::InvalidArgumentError("--params and --dense_below_elements must be >= 0");
  }
  if (static_cast<uint64_t>(absl::GetFlag(FLAGS_params)) > tools::kMaxProfileParams) {
    return absl::InvalidArgumentError(absl::StrCat("--params must be at most ",
                                                   tools::kMaxProfileParams, ", got ",
                                                   absl::GetFlag(FLAGS_params)));
  }
  return absl::OkStatus();
}

absl::StatusOr<CommunicatorOptions> OptionsFromFlags() {
  GRADWIRE_RETURN_IF_ERROR(CheckRunFlags());
  CommunicatorOptions options;
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(absl::GetFlag(FLAGS_spec));
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--spec=\"", absl::GetFlag(FLAGS_spec), "\": ", spec.status().message()));
  }
  options.compression = *spec;
  options.hierarchical = absl::GetFlag(FLAGS_hierarchical);
  options.event_loop_nice = absl::GetFlag(FLAGS_event_loop_nice);
  options.dense_below_elements = absl::GetFlag(FLAGS_dense_below_elements);
  options.dense_one_dimensional = absl::GetFlag(FLAGS_dense_one_dimensional);
  const std::string algo = absl::GetFlag(FLAGS_dense_algorithm);
  if (algo == "halving_doubling") {
    options.dense_algorithm = transport::AllreduceAlgorithm::kHalvingDoubling;
  } else if (algo != "ring") {
    return absl::InvalidArgumentError("--dense_algorithm must be ring or halving_doubling");
  }
  const std::string exchange = absl::GetFlag(FLAGS_exchange);
  if (exchange != "auto" && !(options.exchange = ExchangeKindFromName(exchange))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--exchange must be auto, dense_ring, sparse_allgather, sparse_allreduce or "
                     "cast_allreduce, got \"",
                     exchange, "\""));
  }
  const std::string model = absl::GetFlag(FLAGS_exchange_model);
  if (model == "measure") {
    options.measure_exchange_model = true;
  } else {
    absl::StatusOr<ExchangeModel> parsed = ParseExchangeModel(model);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--exchange_model=\"", model, "\": ", parsed.status().message()));
    }
    options.exchange_model = *parsed;
  }
  return options;
}

// What the timed steps measured, one value per step.
struct Series {
  std::vector<double> iter_ms, compress_ms, auth_ms, wire_ms, sync_ms, transfer_ms, wait_ms,
      copy_ms, span_ms, overlap, cpu_ms;
  ExchangeStats timed;  // summed over the timed steps
  std::string trace;    // --timeline_out: the timed steps' trace events

  void Add(const ExchangeStats& st, double step_ms, double cpu) {
    timed.Add(st);
    iter_ms.push_back(step_ms);
    compress_ms.push_back(absl::ToDoubleMilliseconds(st.compress_time));
    auth_ms.push_back(absl::ToDoubleMilliseconds(st.auth_time));
    wire_ms.push_back(absl::ToDoubleMilliseconds(st.wire_time));
    sync_ms.push_back(absl::ToDoubleMilliseconds(st.sync_time));
    transfer_ms.push_back(absl::ToDoubleMilliseconds(st.wire_time - st.sync_time));
    wait_ms.push_back(absl::ToDoubleMilliseconds(st.wait_time));
    copy_ms.push_back(absl::ToDoubleMilliseconds(st.copy_time));
    span_ms.push_back(absl::ToDoubleMilliseconds(st.span_time));
    overlap.push_back(st.OverlapFraction());
    cpu_ms.push_back(cpu);
  }
};

// One step: gradients written (untimed), aligned, then submitted, flushed
// and waited for. Returns the step's wall time in ms; *cpu_ms its CPU,
// *begun when it began.
absl::StatusOr<double> Step(GradientExchanger& ex, std::vector<Tensor>& tensors,
                            const std::vector<absl::Span<float>>& target, int it,
                            absl::Duration timeout, double* cpu_ms, absl::Time* begun) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::copy(tensors[i].pristine.begin(), tensors[i].pristine.end(), target[i].begin());
  }
  if (absl::GetFlag(FLAGS_align_steps)) GRADWIRE_RETURN_IF_ERROR(ex.Barrier(timeout));
  const double cpu0 = ProcessCpuMs();
  const absl::Time t0 = absl::Now();
  *begun = t0;
  GRADWIRE_RETURN_IF_ERROR(ex.BeginStep(it));
  for (size_t i = 0; i < tensors.size(); ++i) {
    GRADWIRE_RETURN_IF_ERROR(ex.Submit(tensors[i].name, target[i], tensors[i].shape).status());
  }
  GRADWIRE_RETURN_IF_ERROR(ex.Flush());
  GRADWIRE_RETURN_IF_ERROR(ex.WaitAll(timeout));
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  *cpu_ms = ProcessCpuMs() - cpu0;
  // Untimed: the first rank done would otherwise copy its next gradients
  // (a stand-in for backward, which on real hosts runs on their own cores)
  // while its peers still decode this step's frames.
  if (absl::GetFlag(FLAGS_align_steps)) GRADWIRE_RETURN_IF_ERROR(ex.Barrier(timeout));
  return ms;
}

// Warm-up and timed steps, then an orderly Close (no rank may reset a peer
// still finishing the last step).
absl::StatusOr<Series> RunSteps(GradientExchanger& ex, std::vector<Tensor>& tensors, int rank,
                                absl::Duration timeout) {
  const int warmup = absl::GetFlag(FLAGS_warmup), iters = absl::GetFlag(FLAGS_iters);
  // Where each gradient is written before a step ("backward", untimed):
  // its own buffer, or from the second step on its bucket slot.
  std::vector<absl::Span<float>> target(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) target[i] = absl::MakeSpan(tensors[i].grad);
  Series series;
  for (int it = 0; it < warmup + iters; ++it) {
    if (it == 1 && absl::GetFlag(FLAGS_bucket_views)) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        GRADWIRE_ASSIGN_OR_RETURN(target[i], ex.GradientSlot(tensors[i].name));
      }
    }
    double cpu_ms = 0;
    absl::Time begun;
    GRADWIRE_ASSIGN_OR_RETURN(const double ms,
                              Step(ex, tensors, target, it, timeout, &cpu_ms, &begun));
    if (it < warmup) continue;
    series.Add(ex.StepStats(), ms, cpu_ms);
    if (!absl::GetFlag(FLAGS_timeline_out).empty()) {
      tools::AppendTraceEvents(ex.StepTimeline(), rank, it, begun, begun + absl::Milliseconds(ms),
                               &series.trace);
    }
  }
  GRADWIRE_RETURN_IF_ERROR(ex.Close(timeout));
  return series;
}

// What one rank reports, besides the series.
struct RunInfo {
  int rank = 0, world_size = 0, local_world_size = 0, dense_buckets = 0, compressed_buckets = 0;
  uint64_t params = 0, tensors = 0;
  std::string spec;
  bool hierarchical = false;
  int pipeline_depth = 0;
  bool dense_tail_rides = false;         // ExchangerOptions::carry_dense_tail took effect
  ExchangeModel model;                   // the agreed one
  std::map<std::string, int> exchanges;  // compressed buckets per exchange kind
};

// {"name": count, ...} of `counts`, or {"name": value, ...} of the model.
std::string JsonObject(const std::map<std::string, int>& counts) {
  return absl::StrCat("{",
                      absl::StrJoin(counts, ", ",
                                    [](std::string* o, const auto& kv) {
                                      absl::StrAppend(o, JsonQuote(kv.first), ": ", kv.second);
                                    }),
                      "}");
}

std::string ResultJson(const RunInfo& info, const Series& s) {
  const double n_it = std::max<size_t>(1, s.iter_ms.size());
  auto ms = [](const std::vector<double>& v) { return absl::StrFormat("%.3f", Median(v)); };
  return absl::StrCat(
      "{\n  \"ok\": true,\n  \"rank\": ", info.rank, ",\n  \"compression\": ", JsonQuote(info.spec),
      ",\n  \"hierarchical\": ", info.hierarchical ? "true" : "false",
      ",\n  \"world_size\": ", info.world_size,
      ",\n  \"local_world_size\": ", info.local_world_size, ",\n  \"params\": ", info.params,
      ",\n  \"tensors\": ", info.tensors,
      ",\n  \"bucket_size_mb\": ", absl::GetFlag(FLAGS_bucket_size_mb),
      ",\n  \"dense_buckets\": ", info.dense_buckets,
      ",\n  \"compressed_buckets\": ", info.compressed_buckets,
      ",\n  \"dense_tail_rides\": ", info.dense_tail_rides ? "true" : "false",
      ",\n  \"exchanges\": ", JsonObject(info.exchanges),
      ",\n  \"exchange_model\": ", ExchangeModelJson(info.model),
      ",\n  \"warmup\": ", absl::GetFlag(FLAGS_warmup),
      ",\n  \"iters\": ", absl::GetFlag(FLAGS_iters),
      absl::StrFormat(",\n  \"iter_ms\": {\"median\": %.3f, \"p90\": %.3f, \"min\": %.3f, "
                      "\"max\": %.3f}",
                      Median(s.iter_ms), Percentile(s.iter_ms, 0.9), Percentile(s.iter_ms, 0),
                      Percentile(s.iter_ms, 1)),
      absl::StrFormat(",\n  \"bytes_sent_per_iter\": %.0f,\n  \"bytes_received_per_iter\": %.0f"
                      ",\n  \"intra_node_bytes_sent_per_iter\": %.0f"
                      ",\n  \"intra_node_bytes_received_per_iter\": %.0f",
                      s.timed.bytes_sent / n_it, s.timed.bytes_received / n_it,
                      s.timed.intra_node_bytes_sent / n_it,
                      s.timed.intra_node_bytes_received / n_it),
      ",\n  \"compress_ms_median\": ", ms(s.compress_ms),
      ",\n  \"auth_ms_median\": ", ms(s.auth_ms), ",\n  \"wire_ms_median\": ", ms(s.wire_ms),
      ",\n  \"sync_ms_median\": ", ms(s.sync_ms),
      ",\n  \"transfer_ms_median\": ", ms(s.transfer_ms),
      ",\n  \"wait_ms_median\": ", ms(s.wait_ms), ",\n  \"pipeline_depth\": ", info.pipeline_depth,
      ",\n  \"bucket_views\": ", absl::GetFlag(FLAGS_bucket_views) ? "true" : "false",
      ",\n  \"copy_ms_median\": ", ms(s.copy_ms), ",\n  \"span_ms_median\": ", ms(s.span_ms),
      ",\n  \"overlap_fraction_median\": ", ms(s.overlap),
      ",\n  \"align_steps\": ", absl::GetFlag(FLAGS_align_steps) ? "true" : "false",
      ",\n  \"process_cpu_ms_median\": ", ms(s.cpu_ms), ",\n  \"iter_ms_series\": [",
      absl::StrJoin(s.iter_ms, ", ",
                    [](std::string* o, double v) { absl::StrAppendFormat(o, "%.3f", v); }),
      "]\n}\n");
}

// The human-readable line every rank prints (tools read --json_out instead).
void PrintSummary(const RunInfo& info, const Series& s) {
  const double n_it = std::max<size_t>(1, s.iter_ms.size());
  std::printf(
      "rank %d: %s %s P=%d: iter median %.1f ms p90 %.1f ms; per iter sent %.3f MB received "
      "%.3f MB (of which intra-node %.3f / %.3f MB); compress %.1f ms, auth %.1f ms, wire "
      "%.1f ms (sync %.1f, transfer %.1f) (medians); copy %.1f ms, span %.1f ms, overlap "
      "%.0f%% (pipeline depth %d); process CPU %.1f ms per step\n",
      info.rank, info.spec.c_str(), info.hierarchical ? "hierarchical" : "flat", info.world_size,
      Median(s.iter_ms), Percentile(s.iter_ms, 0.9), s.timed.bytes_sent / n_it / 1e6,
      s.timed.bytes_received / n_it / 1e6, s.timed.intra_node_bytes_sent / n_it / 1e6,
      s.timed.intra_node_bytes_received / n_it / 1e6, Median(s.compress_ms), Median(s.auth_ms),
      Median(s.wire_ms), Median(s.sync_ms), Median(s.transfer_ms), Median(s.copy_ms),
      Median(s.span_ms), 100 * Median(s.overlap), info.pipeline_depth, Median(s.cpu_ms));
  if (info.rank == 0) {
    std::printf(
        "plan: %llu tensors, %llu params, %d dense + %d compressed buckets of <= %.1f "
        "MiB%s; compressed by %s\nexchange model: %s\n",
        static_cast<unsigned long long>(info.tensors), static_cast<unsigned long long>(info.params),
        info.dense_buckets, info.compressed_buckets, absl::GetFlag(FLAGS_bucket_size_mb),
        info.dense_tail_rides ? "; the dense tail rides in the last compressed bucket's frames"
                              : "",
        JsonObject(info.exchanges).c_str(), ExchangeModelToString(info.model).c_str());
  }
}

int Main() {
  absl::StatusOr<CommunicatorOptions> options = OptionsFromFlags();
  if (!options.ok()) return Fail(options.status());
  // The profile before the rendezvous settings, so that a bad profile is
  // named even where those are missing too (its JSON needs the rank).
  absl::StatusOr<std::vector<std::vector<int64_t>>> shapes = LoadShapes();
  absl::StatusOr<transport::RendezvousConfig> config = ConfigFromFlags();
  if (!shapes.ok()) return Fail(shapes.status(), config.ok() ? config->rank : -1);
  if (!config.ok()) return Fail(config.status());
  const int rank = config->rank;
  RunInfo info;
  absl::StatusOr<std::vector<Tensor>> made = tools::MakeProfileTensors(*shapes, rank, &info.params);
  if (!made.ok()) return Fail(made.status(), rank);
  std::vector<Tensor> tensors = std::move(*made);
  auto comm = Connect(*config, *options);
  if (!comm.ok()) return Fail(comm.status(), rank);
  const Communicator* c = comm->get();  // owned by the exchanger from here on
  ExchangerOptions eo;
  eo.bucket_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_bucket_size_mb) * (1 << 20));
  eo.pipeline_depth = absl::GetFlag(FLAGS_pipeline_depth);
  eo.carry_dense_tail = absl::GetFlag(FLAGS_carry_dense_tail);
  auto ex = GradientExchanger::Create(std::move(*comm), eo);
  if (!ex.ok()) return Fail(ex.status(), rank);
  absl::StatusOr<Series> series = RunSteps(**ex, tensors, rank, config->timeout);
  if (!series.ok()) return Fail(series.status(), rank);

  info.rank = rank;
  info.world_size = config->world_size;
  info.local_world_size = config->local_world_size;
  info.tensors = tensors.size();
  info.spec = options->compression.ToString();
  info.hierarchical = options->hierarchical;
  info.pipeline_depth = eo.pipeline_depth;
  info.model = c->exchange_model();
  for (const BucketInfo& b : (*ex)->Plan()) {
    (b.path == ExchangePath::kDense ? info.dense_buckets : info.compressed_buckets)++;
    if (b.path != ExchangePath::kDense) info.exchanges[ExchangeKindName(c->KindFor(b.elements))]++;
    if (b.carried_by >= 0) info.dense_tail_rides = true;
  }
  PrintSummary(info, *series);
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    absl::Status s = WriteFileAtomically(JsonPath(rank), ResultJson(info, *series));
    if (!s.ok()) return Fail(s);
  }
  if (!absl::GetFlag(FLAGS_timeline_out).empty()) {
    const std::string path =
        absl::StrReplaceAll(absl::GetFlag(FLAGS_timeline_out), {{"{rank}", absl::StrCat(rank)}});
    absl::Status s = WriteFileAtomically(path, tools::TraceJson(rank, series->trace));
    if (!s.ok()) return Fail(s);
  }
  return 0;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "exchange_bench", &exit_code))
    return exit_code;
  return gradwire::Main();
}
