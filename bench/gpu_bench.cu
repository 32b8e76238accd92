// GPU benchmark of every gradwire kernel at gradient sizes of real models
// (1M, 25.6M ResNet-50, 110M BERT-base, 340M BERT-large) and densities
// 0.1 % / 1 % / 10 %.
//
// Method (docs/gpu.md, /work/.library/device/METHOD.md): inputs generated on
// the device (normal, from a counter hash: never zeros), one warm-up call,
// then --reps timed calls, each preceded by a 128 MB read that evicts the
// 50 MB L2, each timed alone with CUDA events; the median is reported.
// Next to each kernel, in the same run: a device-to-device copy moving the
// kernel's byte floor (read + write), timed the same way, so the figure
// that matters is `copy_ms / kernel_ms` = fraction of achievable bandwidth
// over the bytes the kernel must move.
//
// Output: CSV on stdout (one header line, one line per measurement), a
// human table on stderr. Usage: gpu_bench [--sizes=1000000,...]
// [--densities=0.001,...] [--reps=N] [--quick].
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/cuda/fused_sgd.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/quantized_sum.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/sparse_sum.h"
#include "gradwire/kernels/cuda/topk.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace bench {
namespace {

using kernels::ValueFormat;

#define CHECK_CUDA(expr)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define CHECK_OK(expr)                                                                           \
  do {                                                                                           \
    absl::Status s_ = (expr);                                                                    \
    if (!s_.ok()) {                                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, s_.ToString().c_str()); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// Standard normal from the counter hash (Box-Muller): reproducible, no host copy.
__global__ void FillNormal(float* x, uint64_t n, uint64_t seed, float scale) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = kernels::CounterHash(seed, 0, 7, i);
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 5.9604644775390625e-8f;
    const float u2 = static_cast<float>((h >> 16) & 0xffffff) * 5.9604644775390625e-8f;
    x[i] = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  }
}

// Random strictly increasing indices: every n/k-th slot plus a hashed jitter.
__global__ void FillIndices(uint32_t* idx, uint64_t k, uint64_t n, uint64_t seed) {
  const uint64_t stride = n / k;
  for (uint64_t j = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; j < k;
       j += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    idx[j] = static_cast<uint32_t>(j * stride + kernels::CounterHash(seed, 1, 7, j) % stride);
  }
}

__global__ void ReadAll(const float4* p, uint64_t n4, float* sink) {
  float acc = 0.0f;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) *sink = acc;  // keeps the loads alive
}

struct Device {
  int sms = 0;
  size_t l2 = 0;
  std::string name;
  float* flush = nullptr;  // 128 MB, read before each timed call
  float* sink = nullptr;
  cudaEvent_t start, stop;
};

Device g_dev;

template <typename T>
T* Alloc(uint64_t count) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<uint64_t>(count, 1) * sizeof(T)));
  return static_cast<T*>(p);
}

void FlushL2() {
  ReadAll<<<g_dev.sms * 4, 512>>>(reinterpret_cast<const float4*>(g_dev.flush), (128u << 20) / 16,
                                  g_dev.sink);
  CHECK_CUDA(cudaGetLastError());
}

// Median (and min) of `reps` individually timed calls after one warm-up.
struct Timing {
  double median_ms, min_ms;
};

int g_reps = 20;

Timing Time(const std::function<void()>& call) {
  call();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < g_reps; ++r) {
    FlushL2();
    CHECK_CUDA(cudaEventRecord(g_dev.start));
    call();
    CHECK_CUDA(cudaEventRecord(g_dev.stop));
    CHECK_CUDA(cudaEventSynchronize(g_dev.stop));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, g_dev.start, g_dev.stop));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

// A device-to-device copy moving `bytes` in total (bytes/2 read, bytes/2 written).
double CopyMs(uint64_t bytes) {
  const uint64_t half = std::max<uint64_t>(bytes / 2, 16);
  static void* a = nullptr;
  static void* b = nullptr;
  static uint64_t cap = 0;
  if (half > cap) {
    if (a != nullptr) {
      CHECK_CUDA(cudaFree(a));
      CHECK_CUDA(cudaFree(b));
    }
    CHECK_CUDA(cudaMalloc(&a, half));
    CHECK_CUDA(cudaMalloc(&b, half));
    CHECK_CUDA(cudaMemset(a, 1, half));
    cap = half;
  }
  return Time([&] { CHECK_CUDA(cudaMemcpyAsync(b, a, half, cudaMemcpyDeviceToDevice)); }).median_ms;
}

void Header() {
  std::printf(
      "device,kernel,n,density,k,median_ms,min_ms,floor_bytes,copy_ms_same_bytes,fraction_of_copy_"
      "bw,"
      "reads_of_4n\n");
  std::fprintf(stderr, "%-28s %11s %7s %10s %10s %12s %10s %7s %7s\n", "kernel", "n", "density",
               "median_ms", "min_ms", "floor_MB", "copy_ms", "frac", "reads");
}

// reads_of_4n: kernel time over the time to read 4n bytes at the copy's
// bandwidth (the issue's "within 2 full reads" figure for top-k).
void Report(const std::string& kernel, uint64_t n, double density, uint64_t k, Timing t,
            double floor_bytes, double copy_4n_ms) {
  const double copy_ms = CopyMs(static_cast<uint64_t>(floor_bytes));
  const double frac = copy_ms / t.median_ms;
  const double one_read_ms = copy_4n_ms / 2.0;  // the copy of 4n moved 8n bytes
  std::printf("%s,%s,%llu,%g,%llu,%.4f,%.4f,%.0f,%.4f,%.3f,%.2f\n", g_dev.name.c_str(),
              kernel.c_str(), static_cast<unsigned long long>(n), density,
              static_cast<unsigned long long>(k), t.median_ms, t.min_ms, floor_bytes, copy_ms, frac,
              t.median_ms / one_read_ms);
  std::fprintf(stderr, "%-28s %11llu %7g %10.4f %10.4f %12.1f %10.4f %7.3f %7.2f\n", kernel.c_str(),
               static_cast<unsigned long long>(n), density, t.median_ms, t.min_ms,
               floor_bytes / 1e6, copy_ms, frac, t.median_ms / one_read_ms);
  std::fflush(stdout);
}

std::vector<double> ParseList(const char* s) {
  std::vector<double> v;
  std::string str(s);
  size_t pos = 0;
  while (pos < str.size()) {
    size_t end = str.find(',', pos);
    if (end == std::string::npos) end = str.size();
    v.push_back(std::atof(str.substr(pos, end - pos).c_str()));
    pos = end + 1;
  }
  return v;
}

void BenchSize(uint64_t n, const std::vector<double>& densities) {
  float* grad = Alloc<float>(n);
  float* residual = Alloc<float>(n);
  FillNormal<<<g_dev.sms * 8, 256>>>(grad, n, 1, 1e-3f);
  FillNormal<<<g_dev.sms * 8, 256>>>(residual, n, 2, 1e-4f);
  CHECK_CUDA(cudaGetLastError());
  const double copy_4n_ms = CopyMs(8 * n);
  Report("copy_4n (baseline)", n, 0, 0, Timing{copy_4n_ms, copy_4n_ms}, 8.0 * n, copy_4n_ms);

  auto* stats = Alloc<kernels::FusedStats>(1);
  uint64_t kmax = static_cast<uint64_t>(*std::max_element(densities.begin(), densities.end()) * n);
  auto* indices = Alloc<uint32_t>(kmax);
  auto* values = Alloc<uint8_t>(4 * kmax);
  uint64_t temp_bytes = 0, t2 = 0;
  CHECK_OK(kernels::cuda::TopKCompress(nullptr, &temp_bytes, grad, residual, n, kmax,
                                       ValueFormat::kFp32, indices, values, stats, nullptr));
  CHECK_OK(kernels::cuda::RandomKCompress(nullptr, &t2, grad, residual, n, kmax, 0, 0,
                                          ValueFormat::kFp32, indices, values, stats, nullptr));
  temp_bytes = std::max(temp_bytes, t2);
  CHECK_OK(kernels::cuda::TopKCompress16(nullptr, &t2, nullptr, ValueFormat::kFp16, n, kmax,
                                         ValueFormat::kFp32, indices, values, stats, nullptr));
  temp_bytes = std::max(temp_bytes, t2);
  auto* temp = Alloc<uint8_t>(temp_bytes);
  uint16_t* half = Alloc<uint16_t>(n);
  CHECK_OK(kernels::cuda::CastCompress(grad, nullptr, n, ValueFormat::kFp16,
                                       reinterpret_cast<uint8_t*>(half), nullptr, nullptr));

  for (double density : densities) {
    const uint64_t k = std::max<uint64_t>(1, static_cast<uint64_t>(density * n));
    // Selection: floor = one read of the input + the output (with EF: read
    // g and e, write e, + output).
    Report("topk_exact", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::TopKCompress(temp, &temp_bytes, grad, nullptr, n, k,
                                                  ValueFormat::kFp32, indices, values, stats,
                                                  nullptr));
           }),
           4.0 * n + 8.0 * k, copy_4n_ms);
    // The same call captured once in a CUDA graph (it never syncs the host,
    // so it can be): the difference to topk_exact is launch overhead.
    {
      cudaStream_t s;
      CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
      CHECK_OK(kernels::cuda::TopKCompress(temp, &temp_bytes, grad, nullptr, n, k,
                                           ValueFormat::kFp32, indices, values, stats, s));
      CHECK_CUDA(cudaStreamEndCapture(s, &graph));
      CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      Report("topk_exact_graph", n, density, k,
             Time([&] { CHECK_CUDA(cudaGraphLaunch(exec, nullptr)); }), 4.0 * n + 8.0 * k,
             copy_4n_ms);
      CHECK_CUDA(cudaGraphExecDestroy(exec));
      CHECK_CUDA(cudaGraphDestroy(graph));
      CHECK_CUDA(cudaStreamDestroy(s));
    }
    Report("topk_exact_ef", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::TopKCompress(temp, &temp_bytes, grad, residual, n, k,
                                                  ValueFormat::kFp32, indices, values, stats,
                                                  nullptr));
           }),
           12.0 * n + 8.0 * k, copy_4n_ms);
    Report("topk_exact_fp16_input", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::TopKCompress16(temp, &temp_bytes, half, ValueFormat::kFp16, n,
                                                    k, ValueFormat::kFp16, indices, values, stats,
                                                    nullptr));
           }),
           2.0 * n + 6.0 * k, copy_4n_ms);
    Report("topk_approx_ef", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::ApproxTopKCompress(temp, &temp_bytes, grad, residual, n, k,
                                                        ValueFormat::kFp32, indices, values, stats,
                                                        nullptr, nullptr));
           }),
           12.0 * n + 8.0 * k, copy_4n_ms);
    Report("randomk_ef", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::RandomKCompress(temp, &temp_bytes, grad, residual, n, k, 7, 1,
                                                     ValueFormat::kFp32, indices, values, stats,
                                                     nullptr));
           }),
           12.0 * n + 4.0 * k, copy_4n_ms);
    // Decode-accumulate of 8 workers' payloads (fp32 values).
    const int P = 8;
    std::vector<uint32_t*> w_idx(P);
    std::vector<float*> w_val(P);
    std::vector<kernels::SparsePayload> payloads(P);
    for (int w = 0; w < P; ++w) {
      w_idx[w] = Alloc<uint32_t>(k);
      w_val[w] = Alloc<float>(k);
      FillIndices<<<g_dev.sms * 4, 256>>>(w_idx[w], k, n, 100 + w);
      FillNormal<<<g_dev.sms * 4, 256>>>(w_val[w], k, 200 + w, 1e-3f);
      payloads[w] = {w_idx[w], reinterpret_cast<const uint8_t*>(w_val[w]), k, ValueFormat::kFp32};
    }
    CHECK_CUDA(cudaGetLastError());
    float* dense = Alloc<float>(n);
    Report("decode_accumulate_p8", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::SparseSumToDense(payloads, dense, n, {false, 1.0f / P},
                                                      nullptr, nullptr));
           }),
           4.0 * n + 8.0 * P * k, copy_4n_ms);
    // The same with the device-side index check counting broken entries
    // (reads every index once more, mostly from L2).
    auto* bad = Alloc<uint64_t>(1);
    Report("decode_accumulate_p8_checked", n, density, k, Time([&] {
             CHECK_OK(kernels::cuda::SparseSumToDense(payloads, dense, n, {false, 1.0f / P}, bad,
                                                      nullptr));
           }),
           4.0 * n + 8.0 * P * k, copy_4n_ms);
    CHECK_CUDA(cudaFree(bad));
    for (int w = 0; w < P; ++w) {
      CHECK_CUDA(cudaFree(w_idx[w]));
      CHECK_CUDA(cudaFree(w_val[w]));
    }
    CHECK_CUDA(cudaFree(dense));
  }

  // Dense codecs (density-independent).
  const uint32_t bucket = 512;
  auto* scales = Alloc<uint8_t>(4 * kernels::BucketCount(n, bucket));
  auto* packed = Alloc<uint8_t>(kernels::PackedBytes(n, 8));
  for (uint32_t bits : {1u, 4u, 8u}) {
    Report("qsgd" + std::to_string(bits) + "_ef", n, 1, n, Time([&] {
             CHECK_OK(kernels::cuda::QsgdCompress(grad, residual, n, bits, bucket, 3, 4, scales,
                                                  packed, stats, nullptr));
           }),
           12.0 * n + n * bits / 8.0 + 4.0 * n / bucket, copy_4n_ms);
  }
  Report("sign_ef", n, 1, n, Time([&] {
           CHECK_OK(kernels::cuda::SignCompress(grad, residual, n, bucket, scales, packed, stats,
                                                nullptr));
         }),
         12.0 * n + n / 8.0 + 4.0 * n / bucket, copy_4n_ms);
  auto* cast_out = Alloc<uint8_t>(2 * n);
  Report("cast_fp16_ef", n, 1, n, Time([&] {
           CHECK_OK(kernels::cuda::CastCompress(grad, residual, n, ValueFormat::kFp16, cast_out,
                                                stats, nullptr));
         }),
         14.0 * n, copy_4n_ms);
  CHECK_CUDA(cudaFree(cast_out));
  float* dense = Alloc<float>(n);
  Report(
      "qsgd4_decode_accumulate", n, 1, n, Time([&] {
        CHECK_OK(kernels::cuda::QsgdDecodeAccumulate(scales, packed, n, 4, bucket, dense, nullptr));
      }),
      8.0 * n + n / 2.0 + 4.0 * n / bucket, copy_4n_ms);

  // Sum of 8 workers' 4-bit QSGD payloads (distinct copies, so no L2 reuse).
  {
    const int P = 8;
    const uint64_t sb = 4 * kernels::BucketCount(n, bucket), pb = kernels::PackedBytes(n, 4);
    std::vector<uint8_t*> bufs;
    std::vector<kernels::QuantizedPayload> payloads;
    for (int w = 0; w < P; ++w) {
      bufs.push_back(Alloc<uint8_t>(sb + pb));
      CHECK_CUDA(cudaMemcpy(bufs.back(), scales, sb, cudaMemcpyDeviceToDevice));
      CHECK_CUDA(cudaMemcpy(bufs.back() + sb, packed, pb, cudaMemcpyDeviceToDevice));
      payloads.push_back({bufs.back(), bufs.back() + sb});
    }
    Report("qsgd4_sum_p8", n, 1, n, Time([&] {
             CHECK_OK(kernels::cuda::QuantizedSumToDense(payloads, {false, 4, bucket}, dense, n,
                                                         {false, 1.0f / P}, nullptr));
           }),
           4.0 * n + P * (n / 2.0 + 4.0 * n / bucket), copy_4n_ms);
    for (uint8_t* b : bufs) CHECK_CUDA(cudaFree(b));
  }

  // Fused SGD over a model-like tensor list: ~160 tensors, sizes from a
  // few hundred elements to a few million, summing to n.
  {
    float* momentum = Alloc<float>(n);
    CHECK_CUDA(cudaMemset(momentum, 0, n * sizeof(float)));
    std::vector<kernels::SgdTensor> tensors;
    uint64_t off = 0;
    for (int t = 0; off < n; ++t) {
      uint64_t size = std::min<uint64_t>(n - off, (t % 3 == 0 ? 512 : (n / 100) + 4 * t));
      tensors.push_back({dense + off, grad + off, momentum + off, size});
      off += size;
    }
    kernels::SgdOptions o;
    o.lr = 0.1f;
    o.momentum = 0.9f;
    o.weight_decay = 1e-4f;
    size_t bytes = 0;
    kernels::cuda::FusedSgdPlan plan;
    CHECK_OK(kernels::cuda::PrepareFusedSgd(nullptr, &bytes, tensors, o, &plan, nullptr));
    auto* storage = Alloc<uint8_t>(bytes);
    CHECK_OK(kernels::cuda::PrepareFusedSgd(storage, &bytes, tensors, o, &plan, nullptr));
    Report("fused_sgd_" + std::to_string(tensors.size()) + "_tensors", n, 1, n,
           Time([&] { CHECK_OK(kernels::cuda::FusedSgdStep(plan, o, nullptr)); }), 20.0 * n,
           copy_4n_ms);
    CHECK_CUDA(cudaFree(storage));
    CHECK_CUDA(cudaFree(momentum));
  }
  for (void* p : std::vector<void*>{grad, residual, stats, indices, values, temp, half, scales,
                                    packed, dense}) {
    CHECK_CUDA(cudaFree(p));
  }
}

int Main(int argc, char** argv) {
  std::string why;
  if (kernels::cuda::DeviceCount(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  std::vector<double> sizes = {1e6, 25.6e6, 110e6, 340e6};
  std::vector<double> densities = {0.001, 0.01, 0.1};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sizes=", 8) == 0)
      sizes = ParseList(argv[i] + 8);
    else if (std::strncmp(argv[i], "--densities=", 12) == 0)
      densities = ParseList(argv[i] + 12);
    else if (std::strncmp(argv[i], "--reps=", 7) == 0)
      g_reps = std::max(1, std::atoi(argv[i] + 7));
    else if (std::strcmp(argv[i], "--quick") == 0) {
      sizes = {1e6, 4e6};
      g_reps = 3;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_dev.sms = prop.multiProcessorCount;
  g_dev.l2 = prop.l2CacheSize;
  g_dev.name = prop.name;
  std::replace(g_dev.name.begin(), g_dev.name.end(), ',', ' ');
  std::fprintf(stderr,
               "device: %s, %d SMs, L2 %zu MB, reps %d (median), L2 flushed before each call\n",
               prop.name, g_dev.sms, g_dev.l2 >> 20, g_reps);
  g_dev.flush = Alloc<float>((128u << 20) / 4);
  CHECK_CUDA(cudaMemset(g_dev.flush, 0, 128u << 20));
  g_dev.sink = Alloc<float>(1);
  CHECK_CUDA(cudaEventCreate(&g_dev.start));
  CHECK_CUDA(cudaEventCreate(&g_dev.stop));
  Header();
  for (double s : sizes) BenchSize(static_cast<uint64_t>(s), densities);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace gradwire

int main(int argc, char** argv) { return gradwire::bench::Main(argc, argv); }
