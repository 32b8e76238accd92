// The device path end to end (docs/device_path.md): 2-4 ranks, threads of
// one process sharing one GPU, exchange a model profile's gradients with
// Communicator::AllreduceMeanOnDevice and, for the same gradients, with
// AllreduceMean from host buffers; every averaged tensor must be equal bit
// for bit, and both are timed. tools/gpu/run_on_device.sh's `device`
// phase runs it under compute-sanitizer and natively (first run: an H200,
// docs/results/2026-11-27-h200-first-run.md). --device=host runs it on
// kernels::HostDevice (CI's smoke test).
//
//   device_exchange --device=cuda --ranks=4 --profile_file=resnet50.txt
//       --spec=topk:ratio=0.01 --steps=5   (one command line)
//
// Prints one CSV line: device,ranks,spec,params,steps,device_ms,host_ms,
// mismatches (device_ms / host_ms: median per step over the ranks' worst).
// Exit status 1 if any element differs or an exchange fails.
//
// --api=exchanger drives a GradientExchanger instead (Submit every tensor,
// Flush, WaitAll; 25 MB buckets), one with device gradients on the rank's
// stream against one with the same gradients in host memory.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gloo/rendezvous/hash_store.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/device.h"
#include "gradwire/kernels/host_device.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_store.h"

ABSL_FLAG(std::string, device, "cuda", "cuda, or host (the CI stand-in)");
ABSL_FLAG(int, ranks, 2, "ranks sharing the device (2..4)");
ABSL_FLAG(std::string, spec, "topk:ratio=0.01", "compression spec");
ABSL_FLAG(std::string, profile_file, "", "one \"d0xd1x...\" shape per line (model_profiles.py)");
ABSL_FLAG(int64_t, params, 0, "instead of --profile_file: one tensor of N floats");
ABSL_FLAG(int, steps, 3, "training steps");
ABSL_FLAG(std::string, api, "communicator",
          "communicator (AllreduceMean per tensor) or exchanger (GradientExchanger)");

namespace gradwire {
namespace {

using kernels::CopyKind;

absl::StatusOr<std::vector<uint64_t>> LoadSizes() {
  if (absl::GetFlag(FLAGS_params) > 0) {
    return std::vector<uint64_t>{static_cast<uint64_t>(absl::GetFlag(FLAGS_params))};
  }
  std::ifstream in(absl::GetFlag(FLAGS_profile_file));
  if (!in) return absl::NotFoundError("cannot read --profile_file (or pass --params)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> sizes;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    uint64_t n = 1;
    for (absl::string_view d : absl::StrSplit(absl::StripAsciiWhitespace(line), 'x')) {
      uint64_t v;
      if (!absl::SimpleAtoi(d, &v)) {
        return absl::InvalidArgumentError(absl::StrCat("bad shape line \"", line, "\""));
      }
      n *= v;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("profile has no tensors");
  return sizes;
}

void Fill(std::vector<float>& g, uint64_t salt) {
  uint32_t x = static_cast<uint32_t>(salt * 2654435761u + 1);
  for (float& v : g) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(x)) * 1e-9f;
  }
}

struct RankResult {
  absl::Status status;
  uint64_t mismatches = 0;
  std::vector<double> device_ms, host_ms;
};

absl::StatusOr<std::unique_ptr<Communicator>> Connect(
    int rank, int ranks, const std::shared_ptr<transport::RendezvousStore>& store,
    const std::string& scope, kernels::Device* device) {
  GRADWIRE_ASSIGN_OR_RETURN(
      auto world,
      transport::GlooGroup::Create(rank, ranks, store->Scoped(scope), transport::GroupOptions()));
  GRADWIRE_ASSIGN_OR_RETURN(JobSecret secret,
                            JobSecret::FromValue("device-exchange-secret-0123456789", "tool"));
  GRADWIRE_ASSIGN_OR_RETURN(FrameAuthenticator auth, FrameAuthenticator::Create(secret, "job"));
  CommunicatorOptions options;
  GRADWIRE_ASSIGN_OR_RETURN(options.compression, CompressionSpec::Parse(absl::GetFlag(FLAGS_spec)));
  options.exchange = ExchangeKind::kSparseAllgather;  // on both paths
  options.device = device;
  return Communicator::Create(std::move(world), 0, 1, std::move(auth), options);
}

// One side of the comparison: per-tensor AllreduceMean(OnDevice) calls, or a
// GradientExchanger over the same communicator.
class Side {
 public:
  Side(std::unique_ptr<Communicator> comm, bool on_device, kernels::cuda::Stream stream)
      : comm_(std::move(comm)), on_device_(on_device), stream_(stream) {}

  absl::Status UseExchanger() {
    ExchangerOptions options;
    options.stream = stream_;
    // Device buckets carry no dense section; the host side's dense tail
    // takes the ring too, so that both give the same bits.
    options.carry_dense_tail = false;
    GRADWIRE_ASSIGN_OR_RETURN(exchanger_, GradientExchanger::Create(std::move(comm_), options));
    return absl::OkStatus();
  }

  // Averages every tensor of `step` in place.
  absl::Status Step(uint64_t step, const std::vector<absl::Span<float>>& tensors) {
    if (exchanger_ != nullptr) {
      GRADWIRE_RETURN_IF_ERROR(exchanger_->BeginStep(step));
      for (size_t t = 0; t < tensors.size(); ++t) {
        GRADWIRE_RETURN_IF_ERROR(exchanger_->Submit(absl::StrCat("t", t), tensors[t]).status());
      }
      GRADWIRE_RETURN_IF_ERROR(exchanger_->Flush());
      return exchanger_->WaitAll(absl::Seconds(120));
    }
    for (size_t t = 0; t < tensors.size(); ++t) {
      const uint32_t id = static_cast<uint32_t>(t);
      const ExchangePath path = comm_->PathFor(tensors[t].size(), false);
      GRADWIRE_RETURN_IF_ERROR(
          on_device_ ? comm_->AllreduceMeanOnDevice(id, step, tensors[t], path, stream_)
                     : comm_->AllreduceMean(id, step, tensors[t], path));
    }
    return absl::OkStatus();
  }

  absl::Status Close() {
    return exchanger_ != nullptr ? exchanger_->Close(absl::Seconds(60)) : comm_->Close();
  }

 private:
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<GradientExchanger> exchanger_;
  bool on_device_;
  kernels::cuda::Stream stream_;
};

void RunRank(int rank, int ranks, const std::vector<uint64_t>& sizes,
             const std::shared_ptr<transport::RendezvousStore>& store, kernels::Device& device,
             kernels::cuda::Stream stream, RankResult* out) {
  auto fail = [out](absl::Status s) { out->status = s; };
  absl::StatusOr<std::unique_ptr<Communicator>> dev_comm =
      Connect(rank, ranks, store, "d", &device);
  if (!dev_comm.ok()) return fail(dev_comm.status());
  absl::StatusOr<std::unique_ptr<Communicator>> host_comm =
      Connect(rank, ranks, store, "h", nullptr);
  if (!host_comm.ok()) return fail(host_comm.status());
  Side dev(std::move(*dev_comm), true, stream), host(std::move(*host_comm), false, nullptr);
  if (absl::GetFlag(FLAGS_api) == "exchanger") {
    absl::Status s = dev.UseExchanger();
    if (s.ok()) s = host.UseExchanger();
    if (!s.ok()) return fail(s);
  }
  std::vector<absl::Span<float>> dev_tensors(sizes.size()), host_tensors(sizes.size());
  for (size_t t = 0; t < sizes.size(); ++t) {
    absl::StatusOr<void*> p = device.Allocate(sizes[t] * sizeof(float));
    if (!p.ok()) return fail(p.status());
    dev_tensors[t] = absl::MakeSpan(static_cast<float*>(*p), sizes[t]);
  }
  const absl::Time far = absl::InfiniteFuture();
  std::vector<std::vector<float>> grads(sizes.size());
  std::vector<float> back;
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      grads[t].resize(sizes[t]);
      Fill(grads[t], (step * 1000003ull + t) * 8 + rank);
      host_tensors[t] = absl::MakeSpan(grads[t]);
      absl::Status s = device.Copy(dev_tensors[t].data(), grads[t].data(), sizes[t] * 4,
                                   CopyKind::kHostToDevice, stream);
      if (!s.ok()) return fail(s);
    }
    if (absl::Status s = device.WaitStream(stream, far); !s.ok()) return fail(s);
    absl::Time t0 = absl::Now();
    absl::Status s = dev.Step(step, dev_tensors);
    if (s.ok()) s = device.WaitStream(stream, far);
    if (!s.ok()) return fail(s);
    out->device_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    t0 = absl::Now();
    if (s = host.Step(step, host_tensors); !s.ok()) return fail(s);
    out->host_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    for (size_t t = 0; t < sizes.size(); ++t) {
      back.resize(sizes[t]);
      s = device.Copy(back.data(), dev_tensors[t].data(), sizes[t] * 4, CopyKind::kDeviceToHost,
                      stream);
      if (s.ok()) s = device.WaitStream(stream, far);
      if (!s.ok()) return fail(s);
      for (uint64_t i = 0; i < sizes[t]; ++i) {
        out->mismatches += std::memcmp(&back[i], &grads[t][i], 4) != 0;
      }
    }
  }
  absl::Status closed = dev.Close();
  if (closed.ok()) closed = host.Close();
  for (absl::Span<float> b : dev_tensors) device.Free(b.data());
  out->status = closed;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const std::string which = absl::GetFlag(FLAGS_device);
  if (ranks < 2 || ranks > 4) return std::fprintf(stderr, "--ranks must be 2..4\n"), 2;
  if (which != "cuda" && which != "host") return std::fprintf(stderr, "--device: cuda|host\n"), 2;
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "communicator" && api != "exchanger") {
    return std::fprintf(stderr, "--api: communicator|exchanger\n"), 2;
  }
  absl::StatusOr<std::vector<uint64_t>> sizes = LoadSizes();
  if (!sizes.ok()) return std::fprintf(stderr, "%s\n", sizes.status().ToString().c_str()), 2;
  std::unique_ptr<kernels::HostDevice> host_device;
  if (which == "host") host_device = std::make_unique<kernels::HostDevice>();
  kernels::Device& device = host_device ? *host_device : kernels::CudaDevice();
  auto store = transport::RendezvousStore::Wrap(std::make_shared<gloo::rendezvous::HashStore>(),
                                                "device_exchange", absl::Seconds(60));
  std::vector<RankResult> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    // The host device gives each rank its own stream; on CUDA the ranks
    // share the legacy default stream (the tool links no CUDA runtime).
    kernels::cuda::Stream stream = host_device ? host_device->CreateStream() : nullptr;
    threads.emplace_back(RunRank, r, ranks, std::cref(*sizes), std::cref(store), std::ref(device),
                         stream, &results[r]);
  }
  for (auto& t : threads) t.join();
  uint64_t params = 0, mismatches = 0;
  for (uint64_t n : *sizes) params += n;
  std::vector<double> device_ms, host_ms;
  int status = 0;
  for (int r = 0; r < ranks; ++r) {
    if (!results[r].status.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, results[r].status.ToString().c_str());
      status = 1;
    }
    mismatches += results[r].mismatches;
  }
  for (size_t s = 0; status == 0 && s < results[0].device_ms.size(); ++s) {
    double d = 0, h = 0;
    for (const RankResult& r : results)
      d = std::max(d, r.device_ms[s]), h = std::max(h, r.host_ms[s]);
    device_ms.push_back(d);
    host_ms.push_back(h);
  }
  std::printf("device,api,ranks,spec,params,steps,device_ms,host_ms,mismatches\n");
  std::printf("%s,%s,%d,\"%s\",%llu,%d,%.3f,%.3f,%llu\n", which.c_str(), api.c_str(), ranks,
              absl::GetFlag(FLAGS_spec).c_str(), static_cast<unsigned long long>(params),
              absl::GetFlag(FLAGS_steps), Median(device_ms), Median(host_ms),
              static_cast<unsigned long long>(mismatches));
  if (mismatches != 0) std::fprintf(stderr, "device path differs from the host path\n");
  return status != 0 || mismatches != 0 ? 1 : 0;
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gradwire::Main();
}
