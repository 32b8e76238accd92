// exchange_bench: times the gradient exchange of a real model's gradient
// profile through the asynchronous bucketed API, one process per rank.
//
//   export GRADWIRE_JOB_SECRET=$(openssl rand -hex 32)
//   python3 tools/launch.py --nproc=4 -- bazel-bin/tools/exchange_bench
//       --profile=resnet50 --compression=topk --compression_ratio=0.01
//       --iters=20 --warmup=3 --json_out=/tmp/topk.json
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
// every tensor in backprop (reverse) order, Flush, WaitAll. The time of
// one iteration is from the first Submit to WaitAll returning, i.e. the
// exchange as a training step would see it with no compute to overlap.
// Inside it the exchanger pipelines buckets (--pipeline_depth): "span" is
// the step's critical path as it ran (first bucket queued to last written
// back) and "overlap" how much of the shorter of CPU stages (compress +
// auth + copy) and wire time it hid under the other.
// Rank 0 prints the summary and writes --json_out; every rank prints a
// one-line per-rank summary.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

ABSL_FLAG(std::string, compression, "topk",
          "method or full spec: none, fp16, bf16, topk, approx_topk, randomk, qsgd, sign, or "
          "e.g. \"topk:ratio=0.01,values=fp16\"");
ABSL_FLAG(double, compression_ratio, -1, "density k/n for sparse methods (default: the spec's)");
ABSL_FLAG(int, quant_bits, -1, "bits per value for qsgd (default: the spec's)");
ABSL_FLAG(double, bucket_size_mb, 25, "bucket fusion size in MiB of fp32 gradient");
ABSL_FLAG(int, pipeline_depth, 2,
          "flat compressed buckets in flight between encode and write-back (1: encode, exchange "
          "and decode one bucket at a time, no overlap)");
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
          "together: emulated hosts share this machine's cores, and one rank's reset "
          "would otherwise run inside its peers' timed steps and skew their start");
ABSL_FLAG(bool, hierarchical, false, "HiTopKComm: nodes from LOCAL_WORLD_SIZE");
ABSL_FLAG(int64_t, dense_below_elements, 16384, "tensors smaller than this go dense");
ABSL_FLAG(bool, dense_one_dimensional, true, "1-D tensors (biases, norms) go dense");
ABSL_FLAG(std::string, dense_algorithm, "ring", "dense allreduce: ring or halving_doubling");
ABSL_FLAG(std::string, profile, "resnet50", "model profile name (tools/model_profiles.py)");
ABSL_FLAG(int64_t, params, 0, "synthetic profile of N floats instead of --profile");
ABSL_FLAG(std::string, profile_file, "",
          "read shapes (one \"d0xd1x...\" per line, forward order) from this file instead of "
          "running tools/model_profiles.py");
ABSL_FLAG(std::string, model_profiles, "tools/model_profiles.py", "path of model_profiles.py");
ABSL_FLAG(int, iters, 20, "timed iterations");
ABSL_FLAG(int, warmup, 3, "untimed iterations first (buffers, plan, connections)");
ABSL_FLAG(std::string, json_out, "", "write rank 0's results as JSON here");
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

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> grad;
  std::vector<float> pristine;
};

absl::StatusOr<std::vector<std::vector<int64_t>>> LoadShapes() {
  std::string text;
  if (!absl::GetFlag(FLAGS_profile_file).empty()) {
    std::ifstream in(absl::GetFlag(FLAGS_profile_file));
    if (!in) return absl::NotFoundError("cannot read --profile_file");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    const std::string cmd = absl::GetFlag(FLAGS_params) > 0
                                ? absl::StrCat("python3 ", absl::GetFlag(FLAGS_model_profiles),
                                               " --params ", absl::GetFlag(FLAGS_params))
                                : absl::StrCat("python3 ", absl::GetFlag(FLAGS_model_profiles), " ",
                                               absl::GetFlag(FLAGS_profile));
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return absl::InternalError(absl::StrCat("cannot run ", cmd));
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, got);
    if (pclose(p) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("\"", cmd,
                                                     "\" failed (unknown --profile? "
                                                     "run from the repository root or set "
                                                     "--model_profiles)"));
    }
  }
  std::vector<std::vector<int64_t>> shapes;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<int64_t> shape;
    for (absl::string_view d : absl::StrSplit(absl::StripAsciiWhitespace(line), 'x')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad shape line \"", line, "\""));
      }
      shape.push_back(v);
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) return absl::InvalidArgumentError("profile has no tensors");
  return shapes;
}

absl::StatusOr<CompressionSpec> SpecFromFlags() {
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(absl::GetFlag(FLAGS_compression));
  if (!spec.ok()) return spec.status();
  if (absl::GetFlag(FLAGS_compression_ratio) > 0)
    spec->ratio = absl::GetFlag(FLAGS_compression_ratio);
  if (absl::GetFlag(FLAGS_quant_bits) > 0) spec->quant_bits = absl::GetFlag(FLAGS_quant_bits);
  if (absl::Status s = spec->Validate(); !s.ok()) return s;
  return spec;
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

// CPU time of this process, all threads, user + system. Emulated hosts
// share this machine's cores, so the sum over ranks of this per step,
// against cores x step time, says whether a step is CPU-bound.
double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "exchange_bench: %s\n", s.ToString().c_str());
  return 1;
}

int Main() {
  absl::StatusOr<CompressionSpec> spec = SpecFromFlags();
  if (!spec.ok()) return Fail(spec.status());
  transport::RendezvousConfig explicit_config;
  explicit_config.iface = absl::GetFlag(FLAGS_iface);
  explicit_config.bind_address = absl::GetFlag(FLAGS_bind_address);
  explicit_config.store_dir = absl::GetFlag(FLAGS_store_dir);
  explicit_config.job_id = absl::GetFlag(FLAGS_job_id);
  explicit_config.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  if (!absl::GetFlag(FLAGS_redis).empty()) {
    std::vector<std::string> hp = absl::StrSplit(absl::GetFlag(FLAGS_redis), ':');
    explicit_config.redis_host = hp[0];
    if (hp.size() > 1 && !absl::SimpleAtoi(hp[1], &explicit_config.redis_port)) {
      return Fail(absl::InvalidArgumentError("--redis must be host:port"));
    }
  }
  auto config = transport::ConfigFromEnvironment(explicit_config);
  if (!config.ok()) return Fail(config.status());

  auto shapes = LoadShapes();
  if (!shapes.ok()) return Fail(shapes.status());
  // Backprop produces gradients last layer first.
  std::vector<Tensor> tensors(shapes->size());
  uint64_t params = 0;
  uint64_t x = 0x9E3779B97F4A7C15ull * (config->rank + 1);
  for (size_t i = 0; i < shapes->size(); ++i) {
    Tensor& t = tensors[shapes->size() - 1 - i];
    t.name = absl::StrCat("param", i);
    t.shape = (*shapes)[i];
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
    t.pristine.resize(n);
    for (float& v : t.pristine) {  // roughly N(0, 1): sum of uniforms
      float s = 0;
      for (int k = 0; k < 4; ++k) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s += static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f;
      }
      v = s * 1.7f;
    }
    t.grad = t.pristine;
  }

  CommunicatorOptions options;
  options.compression = *spec;
  options.hierarchical = absl::GetFlag(FLAGS_hierarchical);
  options.event_loop_nice = absl::GetFlag(FLAGS_event_loop_nice);
  options.dense_below_elements = absl::GetFlag(FLAGS_dense_below_elements);
  options.dense_one_dimensional = absl::GetFlag(FLAGS_dense_one_dimensional);
  const std::string algo = absl::GetFlag(FLAGS_dense_algorithm);
  if (algo == "halving_doubling") {
    options.dense_algorithm = transport::AllreduceAlgorithm::kHalvingDoubling;
  } else if (algo != "ring") {
    return Fail(absl::InvalidArgumentError("--dense_algorithm must be ring or halving_doubling"));
  }
  auto comm = Connect(*config, options);
  if (!comm.ok()) return Fail(comm.status());
  ExchangerOptions eo;
  eo.bucket_bytes = static_cast<uint64_t>(absl::GetFlag(FLAGS_bucket_size_mb) * (1 << 20));
  eo.pipeline_depth = absl::GetFlag(FLAGS_pipeline_depth);
  auto ex = GradientExchanger::Create(std::move(*comm), eo);
  if (!ex.ok()) return Fail(ex.status());

  const absl::Duration timeout = config->timeout;
  const int warmup = absl::GetFlag(FLAGS_warmup), iters = absl::GetFlag(FLAGS_iters);
  std::vector<double> cpu_ms;  // this process's CPU time (all threads) per timed step
  std::vector<double> iter_ms, compress_ms, auth_ms, wire_ms, sync_ms, transfer_ms, wait_ms,
      copy_ms, span_ms, overlap;
  ExchangeStats timed;
  // Where each gradient is written before a step ("backward", untimed):
  // its own buffer, or from the second step on its bucket slot.
  std::vector<absl::Span<float>> target(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) target[i] = absl::MakeSpan(tensors[i].grad);
  const bool bucket_views = absl::GetFlag(FLAGS_bucket_views);
  const bool align_steps = absl::GetFlag(FLAGS_align_steps);
  for (int it = 0; it < warmup + iters; ++it) {
    if (it == 1 && bucket_views) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        absl::StatusOr<absl::Span<float>> slot = (*ex)->GradientSlot(tensors[i].name);
        if (!slot.ok()) return Fail(slot.status());
        target[i] = *slot;
      }
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::copy(tensors[i].pristine.begin(), tensors[i].pristine.end(), target[i].begin());
    }
    if (align_steps) {
      if (absl::Status s = (*ex)->Barrier(timeout); !s.ok()) return Fail(s);
    }
    const double cpu0 = ProcessCpuMs();
    const absl::Time t0 = absl::Now();
    if (absl::Status s = (*ex)->BeginStep(it); !s.ok()) return Fail(s);
    for (size_t i = 0; i < tensors.size(); ++i) {
      Tensor& t = tensors[i];
      auto ticket = (*ex)->Submit(t.name, target[i], t.shape);
      if (!ticket.ok()) return Fail(ticket.status());
    }
    if (absl::Status s = (*ex)->Flush(); !s.ok()) return Fail(s);
    if (absl::Status s = (*ex)->WaitAll(timeout); !s.ok()) return Fail(s);
    const absl::Time t1 = absl::Now();
    const double cpu1 = ProcessCpuMs();
    if (it < warmup) continue;
    cpu_ms.push_back(cpu1 - cpu0);
    const ExchangeStats st = (*ex)->StepStats();
    timed.Add(st);
    iter_ms.push_back(absl::ToDoubleMilliseconds(t1 - t0));
    compress_ms.push_back(absl::ToDoubleMilliseconds(st.compress_time));
    auth_ms.push_back(absl::ToDoubleMilliseconds(st.auth_time));
    wire_ms.push_back(absl::ToDoubleMilliseconds(st.wire_time));
    sync_ms.push_back(absl::ToDoubleMilliseconds(st.sync_time));
    transfer_ms.push_back(absl::ToDoubleMilliseconds(st.wire_time - st.sync_time));
    wait_ms.push_back(absl::ToDoubleMilliseconds(st.wait_time));
    copy_ms.push_back(absl::ToDoubleMilliseconds(st.copy_time));
    span_ms.push_back(absl::ToDoubleMilliseconds(st.span_time));
    overlap.push_back(st.OverlapFraction());
  }
  // Orderly teardown: no rank may reset a peer still finishing the last step.
  if (absl::Status s = (*ex)->Close(timeout); !s.ok()) return Fail(s);
  const double n_it = std::max(1, iters);
  const std::vector<BucketInfo> plan = (*ex)->Plan();
  int dense_b = 0, comp_b = 0;
  for (const BucketInfo& b : plan) (b.path == ExchangePath::kDense ? dense_b : comp_b)++;
  const std::string label =
      absl::StrCat(spec->ToString(), options.hierarchical ? " hierarchical" : " flat",
                   " P=", config->world_size);
  std::printf(
      "rank %d: %s: iter median %.1f ms p90 %.1f ms; per iter sent %.3f MB received %.3f MB "
      "(of which intra-node %.3f / %.3f MB); compress %.1f ms, auth %.1f ms, wire %.1f ms "
      "(sync %.1f, transfer %.1f) (medians); copy %.1f ms, span %.1f ms, overlap %.0f%% "
      "(pipeline depth %d); process CPU %.1f ms per step\n",
      config->rank, label.c_str(), Percentile(iter_ms, 0.5), Percentile(iter_ms, 0.9),
      timed.bytes_sent / n_it / 1e6, timed.bytes_received / n_it / 1e6,
      timed.intra_node_bytes_sent / n_it / 1e6, timed.intra_node_bytes_received / n_it / 1e6,
      Percentile(compress_ms, 0.5), Percentile(auth_ms, 0.5), Percentile(wire_ms, 0.5),
      Percentile(sync_ms, 0.5), Percentile(transfer_ms, 0.5), Percentile(copy_ms, 0.5),
      Percentile(span_ms, 0.5), 100 * Percentile(overlap, 0.5),
      eo.pipeline_depth, Percentile(cpu_ms, 0.5));
  if (config->rank != 0) return 0;
  std::printf("plan: %zu tensors, %d params, %d dense + %d compressed buckets of <= %.1f MiB\n",
              tensors.size(), static_cast<int>(params), dense_b, comp_b,
              absl::GetFlag(FLAGS_bucket_size_mb));
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_json_out));
    out << absl::StrFormat(
        "{\n  \"compression\": \"%s\",\n  \"hierarchical\": %s,\n  \"world_size\": %d,\n"
        "  \"local_world_size\": %d,\n  \"params\": %d,\n  \"tensors\": %d,\n"
        "  \"bucket_size_mb\": %g,\n  \"dense_buckets\": %d,\n  \"compressed_buckets\": %d,\n"
        "  \"warmup\": %d,\n  \"iters\": %d,\n"
        "  \"iter_ms\": {\"median\": %.3f, \"p90\": %.3f, \"min\": %.3f, \"max\": %.3f},\n"
        "  \"bytes_sent_per_iter\": %.0f,\n  \"bytes_received_per_iter\": %.0f,\n"
        "  \"intra_node_bytes_sent_per_iter\": %.0f,\n"
        "  \"intra_node_bytes_received_per_iter\": %.0f,\n"
        "  \"compress_ms_median\": %.3f,\n  \"auth_ms_median\": %.3f,\n"
        "  \"wire_ms_median\": %.3f,\n  \"sync_ms_median\": %.3f,\n"
        "  \"transfer_ms_median\": %.3f,\n  \"wait_ms_median\": %.3f,\n"
        "  \"pipeline_depth\": %d,\n  \"bucket_views\": %s,\n  \"copy_ms_median\": %.3f,\n"
        "  \"span_ms_median\": %.3f,\n  \"overlap_fraction_median\": %.3f,\n"
        "  \"align_steps\": %s,\n  \"process_cpu_ms_median\": %.3f,\n"
        "  \"iter_ms_series\": [%s]\n}\n",
        spec->ToString(), options.hierarchical ? "true" : "false", config->world_size,
        config->local_world_size, params, tensors.size(), absl::GetFlag(FLAGS_bucket_size_mb),
        dense_b, comp_b, warmup, iters, Percentile(iter_ms, 0.5), Percentile(iter_ms, 0.9),
        Percentile(iter_ms, 0), Percentile(iter_ms, 1), timed.bytes_sent / n_it,
        timed.bytes_received / n_it, timed.intra_node_bytes_sent / n_it,
        timed.intra_node_bytes_received / n_it, Percentile(compress_ms, 0.5),
        Percentile(auth_ms, 0.5), Percentile(wire_ms, 0.5), Percentile(sync_ms, 0.5),
        Percentile(transfer_ms, 0.5), Percentile(wait_ms, 0.5),
        eo.pipeline_depth, bucket_views ? "true" : "false", Percentile(copy_ms, 0.5),
        Percentile(span_ms, 0.5), Percentile(overlap, 0.5), align_steps ? "true" : "false",
        Percentile(cpu_ms, 0.5),
        absl::StrJoin(iter_ms, ", ", [](std::string* o, double v) {
          absl::StrAppendFormat(o, "%.3f", v);
        }));
    if (!out) return Fail(absl::InternalError("cannot write --json_out"));
  }
  return 0;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gradwire::Main();
}
