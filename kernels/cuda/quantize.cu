#include "gradwire/kernels/cuda/quantize.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "gradwire/kernels/cuda/cuda_status.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr uint64_t kGroupMax = 4096;  // elements of one shared-memory group

__host__ __device__ inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline uint64_t Min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

struct QuantParams {
  const float* grad;
  float* residual;  // null: no error feedback
  uint64_t n;
  uint32_t bits;    // 1 for sign
  uint32_t max_code;
  uint32_t bucket;
  uint64_t rounding;  // stream key for QSGD's stochastic rounding
  uint8_t* scales;
  uint8_t* packed;
  unsigned long long* nonfinite;  // &stats->nonfinite, or null
};

// What a bucket's scale is built from.
struct QsgdScaleAcc {
  static constexpr bool kSequential = false;  // a max: any order
  float max = 0.0f;
  __device__ void Add(float a) {
    if (IsFinite(a)) max = fmaxf(max, AbsF(a));
  }
  __device__ void Merge(const QsgdScaleAcc& o) { max = fmaxf(max, o.max); }
  __device__ float Scale() const { return max; }
};
struct SignScaleAcc {
  static constexpr bool kSequential = true;  // a double sum: the CPU's order
  double sum = 0.0;
  unsigned long long finite = 0;
  __device__ void Add(float a) {
    if (IsFinite(a)) {
      sum += AbsF(a);
      ++finite;
    }
  }
  __device__ void Merge(const SignScaleAcc& o) {
    sum += o.sum;
    finite += o.finite;
  }
  __device__ float Scale() const { return finite > 0 ? static_cast<float>(sum / static_cast<double>(finite)) : 0.0f; }
};

template <typename ScaleAcc>
__device__ ScaleAcc WarpMerge(ScaleAcc a);
template <>
__device__ QsgdScaleAcc WarpMerge(QsgdScaleAcc a) {
  for (int o = 16; o > 0; o >>= 1) a.max = fmaxf(a.max, __shfl_xor_sync(0xffffffffu, a.max, o));
  return a;
}
template <>
__device__ SignScaleAcc WarpMerge(SignScaleAcc a) {
  for (int o = 16; o > 0; o >>= 1) {
    a.sum += __shfl_xor_sync(0xffffffffu, a.sum, o);
    a.finite += __shfl_xor_sync(0xffffffffu, a.finite, o);
  }
  return a;
}

// Code of one element and its decoded value.
template <bool kSign>
__device__ __forceinline__ uint32_t Encode(const QuantParams& p, uint64_t i, float a, float scale, float* decoded) {
  if (kSign) {
    const uint32_t c = SignCode(a);
    *decoded = SignDecode(c, scale);
    return c;
  }
  const float u = UnitFloat(ElementHash(p.rounding, i));
  const uint32_t c = QsgdQuantize(a, scale, p.max_code, u);
  *decoded = QsgdDequantize(c, scale, p.max_code);
  return c;
}

// Writes the packed bytes of the 8-element unit starting at element i0
// (a multiple of 8, so its codes start on a byte), `count` <= 8 codes.
__device__ __forceinline__ void StoreUnit(uint8_t* packed, uint64_t i0, uint32_t bits, uint64_t word,
                                          uint32_t count) {
  const uint64_t off = i0 / 8 * bits;
  const uint32_t bytes = (count * bits + 7) / 8;
  for (uint32_t b = 0; b < bytes; ++b) packed[off + b] = static_cast<uint8_t>(word >> (8 * b));
}

__device__ __forceinline__ void AddNonFinite(unsigned long long* block_counter, uint32_t count) {
  if (count != 0) atomicAdd(block_counter, static_cast<unsigned long long>(count));
}

// One pass: groups of whole buckets (group_elems a multiple of 8 and of the
// bucket size, except the tensor's last group).
template <bool kSign, typename ScaleAcc>
__global__ void __launch_bounds__(kThreads) QuantizeGroupsKernel(QuantParams p, uint64_t group_elems) {
  extern __shared__ float smem[];
  float* acc = smem;                    // group_elems
  float* scale = smem + group_elems;    // buckets per group (<= group_elems)
  uint8_t* codes = reinterpret_cast<uint8_t*>(smem + 2 * group_elems);  // group_elems
  __shared__ unsigned long long block_nonfinite;
  if (threadIdx.x == 0) block_nonfinite = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  const uint64_t groups = CeilDiv(p.n, group_elems);
  for (uint64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const uint64_t start = g * group_elems;
    const uint32_t len = static_cast<uint32_t>(Min64(group_elems, p.n - start));
    for (uint32_t j = threadIdx.x; j < len; j += kThreads) {
      const uint64_t i = start + j;
      acc[j] = p.residual != nullptr ? p.grad[i] + p.residual[i] : p.grad[i];
    }
    __syncthreads();
    // Scales. QSGD's max is order-free: one warp per bucket. Sign's mean
    // is a double sum the CPU forms left to right; one thread per bucket
    // adds in the same order, so the scale is the CPU's to the bit.
    const uint32_t buckets = static_cast<uint32_t>(CeilDiv(len, p.bucket));
    if (ScaleAcc::kSequential) {
      for (uint32_t b = threadIdx.x; b < buckets; b += kThreads) {
        ScaleAcc s;
        const uint32_t end = static_cast<uint32_t>(Min64(static_cast<uint64_t>(b + 1) * p.bucket, len));
        for (uint32_t j = b * p.bucket; j < end; ++j) s.Add(acc[j]);
        scale[b] = s.Scale();
        StoreValue(p.scales, start / p.bucket + b, s.Scale(), ValueFormat::kFp32);
      }
    } else {
      const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      for (uint32_t b = warp; b < buckets; b += kWarps) {
        ScaleAcc s;
        const uint32_t end = static_cast<uint32_t>(Min64(static_cast<uint64_t>(b + 1) * p.bucket, len));
        for (uint32_t j = b * p.bucket + lane; j < end; j += 32) s.Add(acc[j]);
        s = WarpMerge(s);
        if (lane == 0) {
          scale[b] = s.Scale();
          StoreValue(p.scales, start / p.bucket + b, s.Scale(), ValueFormat::kFp32);
        }
      }
    }
    __syncthreads();
    // Codes and the residual, element-parallel (coalesced residual writes,
    // conflict-free shared reads); codes staged as bytes in shared memory.
    for (uint32_t j = threadIdx.x; j < len; j += kThreads) {
      const float a = acc[j];
      nonfinite += IsFinite(a) ? 0u : 1u;
      float decoded;
      codes[j] = static_cast<uint8_t>(Encode<kSign>(p, start + j, a, scale[j / p.bucket], &decoded));
      if (p.residual != nullptr) p.residual[start + j] = ResidualAfter(a, decoded);
    }
    __syncthreads();
    // Packing: 8 codes (whole bytes) per thread.
    for (uint32_t u = threadIdx.x; u < CeilDiv(len, 8); u += kThreads) {
      const uint32_t j0 = 8 * u;
      const uint32_t count = static_cast<uint32_t>(Min64(8, len - j0));
      uint64_t word = 0;
      for (uint32_t e = 0; e < count; ++e) word |= static_cast<uint64_t>(codes[j0 + e]) << (e * p.bits);
      StoreUnit(p.packed, start + j0, p.bits, word, count);
    }
    __syncthreads();  // acc and scale are reused by the next group
  }
  if (p.nonfinite != nullptr) {
    AddNonFinite(&block_nonfinite, nonfinite);
    __syncthreads();
    if (threadIdx.x == 0 && block_nonfinite != 0) atomicAdd(p.nonfinite, block_nonfinite);
  }
}

// Two passes for buckets larger than a group: scales (one block per
// bucket), then codes from grad and residual again.
template <typename ScaleAcc>
__global__ void __launch_bounds__(kThreads) BucketScaleKernel(QuantParams p) {
  __shared__ ScaleAcc warp_acc[kWarps];
  __shared__ float stage[kThreads];
  const uint64_t buckets = CeilDiv(p.n, p.bucket);
  for (uint64_t b = blockIdx.x; b < buckets; b += gridDim.x) {
    const uint64_t begin = b * p.bucket, end = Min64((b + 1) * p.bucket, p.n);
    if (ScaleAcc::kSequential) {
      // Coalesced loads staged through shared memory; thread 0 adds them in
      // index order (the CPU's order).
      ScaleAcc s;
      for (uint64_t base = begin; base < end; base += kThreads) {
        const uint64_t i = base + threadIdx.x;
        if (i < end) stage[threadIdx.x] = p.residual != nullptr ? p.grad[i] + p.residual[i] : p.grad[i];
        __syncthreads();
        if (threadIdx.x == 0) {
          const uint32_t cnt = static_cast<uint32_t>(Min64(kThreads, end - base));
          for (uint32_t j = 0; j < cnt; ++j) s.Add(stage[j]);
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) StoreValue(p.scales, b, s.Scale(), ValueFormat::kFp32);
      continue;
    }
    ScaleAcc s;
    for (uint64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      s.Add(p.residual != nullptr ? p.grad[i] + p.residual[i] : p.grad[i]);
    }
    s = WarpMerge(s);
    if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      ScaleAcc t = warp_acc[0];
      for (int w = 1; w < kWarps; ++w) t.Merge(warp_acc[w]);
      StoreValue(p.scales, b, t.Scale(), ValueFormat::kFp32);
    }
    __syncthreads();
  }
}

template <bool kSign>
__global__ void __launch_bounds__(kThreads) QuantizeUnitsKernel(QuantParams p) {
  __shared__ unsigned long long block_nonfinite;
  if (threadIdx.x == 0) block_nonfinite = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  const uint64_t units = CeilDiv(p.n, 8);
  for (uint64_t u = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; u < units;
       u += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const uint64_t i0 = 8 * u;
    const uint32_t count = static_cast<uint32_t>(Min64(8, p.n - i0));
    uint64_t word = 0;
    for (uint32_t e = 0; e < count; ++e) {
      const uint64_t i = i0 + e;
      const float a = p.residual != nullptr ? p.grad[i] + p.residual[i] : p.grad[i];
      nonfinite += IsFinite(a) ? 0u : 1u;
      const float scale = LoadValue(p.scales, i / p.bucket, ValueFormat::kFp32);
      float decoded;
      const uint32_t c = Encode<kSign>(p, i, a, scale, &decoded);
      word |= static_cast<uint64_t>(c) << (e * p.bits);
      if (p.residual != nullptr) p.residual[i] = ResidualAfter(a, decoded);
    }
    StoreUnit(p.packed, i0, p.bits, word, count);
  }
  if (p.nonfinite != nullptr) {
    AddNonFinite(&block_nonfinite, nonfinite);
    __syncthreads();
    if (threadIdx.x == 0 && block_nonfinite != 0) atomicAdd(p.nonfinite, block_nonfinite);
  }
}

__global__ void SetSelectedKernel(FusedStats* stats, uint64_t selected) { stats->selected = selected; }

template <bool kSign>
__global__ void __launch_bounds__(kThreads)
    DequantizeAccumulateKernel(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                               uint32_t bucket, float* dense) {
  const uint32_t max_code = QsgdMaxCode(bits);
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const float scale = LoadValue(scales, i / bucket, ValueFormat::kFp32);
    const uint32_t code = ReadPackedCode(packed, i, bits);
    dense[i] += kSign ? SignDecode(code, scale) : QsgdDequantize(code, scale, max_code);
  }
}

__global__ void __launch_bounds__(kThreads)
    CastKernel(const float* grad, float* residual, uint64_t n, ValueFormat format, uint8_t* values,
               unsigned long long* nonfinite_out) {
  __shared__ unsigned long long block_nonfinite;
  if (threadIdx.x == 0) block_nonfinite = 0;
  __syncthreads();
  uint32_t nonfinite = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const float a = residual != nullptr ? grad[i] + residual[i] : grad[i];
    nonfinite += IsFinite(a) ? 0u : 1u;
    StoreValue(values, i, a, format);
    if (residual != nullptr) residual[i] = ResidualAfter(a, RoundToFormat(a, format));
  }
  if (nonfinite_out != nullptr) {
    AddNonFinite(&block_nonfinite, nonfinite);
    __syncthreads();
    if (threadIdx.x == 0 && block_nonfinite != 0) atomicAdd(nonfinite_out, block_nonfinite);
  }
}

__global__ void __launch_bounds__(kThreads)
    CastDecodeKernel(const uint8_t* values, uint64_t n, ValueFormat format, float* dense) {
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    dense[i] += LoadValue(values, i, format);
  }
}

__global__ void __launch_bounds__(kThreads)
    SparseDecodeKernel(const uint32_t* indices, const uint8_t* values, uint64_t k, ValueFormat format,
                       float* dense) {
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; j < k;
       j += static_cast<uint64_t>(gridDim.x) * kThreads) {
    dense[indices[j]] += LoadValue(values, j, format);
  }
}

absl::Status Grid(uint64_t work, unsigned* grid) {
  int device = 0, sms = 0;
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  *grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min<uint64_t>(CeilDiv(work, kThreads), sms * 8ull)));
  return absl::OkStatus();
}

absl::Status StartStats(FusedStats* stats, uint64_t n, cudaStream_t stream) {
  if (stats == nullptr) return absl::OkStatus();
  GRADWIRE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(stats, 0, sizeof(FusedStats), stream));
  SetSelectedKernel<<<1, 1, 0, stream>>>(stats, n);
  GRADWIRE_CUDA_CHECK_LAUNCH("SetSelectedKernel");
  return absl::OkStatus();
}

unsigned long long* NonFinite(FusedStats* stats) {
  return stats != nullptr ? reinterpret_cast<unsigned long long*>(&stats->nonfinite) : nullptr;
}

template <bool kSign, typename ScaleAcc>
absl::Status Quantize(const char* who, const QuantParams& p, cudaStream_t stream) {
  if (p.bits < 1 || p.bits > 8) return absl::InvalidArgumentError(std::string(who) + ": bits must be 1..8");
  if (p.bucket < 1) return absl::InvalidArgumentError(std::string(who) + ": bucket_size must be >= 1");
  if (p.n > 0 && (p.grad == nullptr || p.scales == nullptr || p.packed == nullptr)) {
    return absl::InvalidArgumentError(std::string(who) + ": null buffer");
  }
  if (p.n == 0) return absl::OkStatus();
  // Smallest group of whole buckets starting on a byte: a multiple of 8
  // elements; then as many of those as fit kGroupMax.
  uint64_t unit = p.bucket;
  while (unit % 8 != 0) unit += p.bucket;
  if (unit <= kGroupMax) {
    const uint64_t group = kGroupMax / unit * unit;
    const size_t smem = 2 * group * sizeof(float) + group;  // acc, scales (<= group), codes
    unsigned grid = 0;
    GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(CeilDiv(p.n, group) * kThreads, &grid));
    QuantizeGroupsKernel<kSign, ScaleAcc><<<grid, kThreads, smem, stream>>>(p, group);
    GRADWIRE_CUDA_CHECK_LAUNCH("QuantizeGroupsKernel");
    return absl::OkStatus();
  }
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(CeilDiv(p.n, p.bucket) * kThreads, &grid));
  BucketScaleKernel<ScaleAcc><<<grid, kThreads, 0, stream>>>(p);
  GRADWIRE_CUDA_CHECK_LAUNCH("BucketScaleKernel");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(CeilDiv(p.n, 8), &grid));
  QuantizeUnitsKernel<kSign><<<grid, kThreads, 0, stream>>>(p);
  GRADWIRE_CUDA_CHECK_LAUNCH("QuantizeUnitsKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits, uint32_t bucket_size,
                          uint64_t seed, uint64_t step, uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          Stream stream) {
  if (bits < 1 || bits > 8) return absl::InvalidArgumentError("QsgdCompress: bits must be 1..8");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(StartStats(stats, n, stream));
  const QuantParams p{grad, residual, n, bits, QsgdMaxCode(bits), bucket_size,
                      StreamKey(seed, step, kStreamRounding), scales, packed, NonFinite(stats)};
  return Quantize<false, QsgdScaleAcc>("QsgdCompress", p, stream);
}

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, Stream stream) {
  GRADWIRE_KERNELS_RETURN_IF_ERROR(StartStats(stats, n, stream));
  const QuantParams p{grad, residual, n, 1, 1, bucket_size, 0, scales, packed, NonFinite(stats)};
  return Quantize<true, SignScaleAcc>("SignCompress", p, stream);
}

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                                  uint32_t bucket_size, float* dense, Stream stream) {
  if (bits < 1 || bits > 8 || bucket_size < 1) {
    return absl::InvalidArgumentError("QsgdDecodeAccumulate: bits must be 1..8, bucket_size >= 1");
  }
  if (n == 0) return absl::OkStatus();
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(n, &grid));
  DequantizeAccumulateKernel<false><<<grid, kThreads, 0, stream>>>(scales, packed, n, bits, bucket_size, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("DequantizeAccumulateKernel");
  return absl::OkStatus();
}

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bucket_size,
                                  float* dense, Stream stream) {
  if (bucket_size < 1) return absl::InvalidArgumentError("SignDecodeAccumulate: bucket_size must be >= 1");
  if (n == 0) return absl::OkStatus();
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(n, &grid));
  DequantizeAccumulateKernel<true><<<grid, kThreads, 0, stream>>>(scales, packed, n, 1, bucket_size, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("DequantizeAccumulateKernel");
  return absl::OkStatus();
}

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format, uint8_t* values,
                          FusedStats* stats, Stream stream) {
  GRADWIRE_KERNELS_RETURN_IF_ERROR(StartStats(stats, n, stream));
  if (n == 0) return absl::OkStatus();
  if (grad == nullptr || values == nullptr) return absl::InvalidArgumentError("CastCompress: null buffer");
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(n, &grid));
  CastKernel<<<grid, kThreads, 0, stream>>>(grad, residual, n, format, values, NonFinite(stats));
  GRADWIRE_CUDA_CHECK_LAUNCH("CastKernel");
  return absl::OkStatus();
}

absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format, float* dense,
                                  Stream stream) {
  if (n == 0) return absl::OkStatus();
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(n, &grid));
  CastDecodeKernel<<<grid, kThreads, 0, stream>>>(values, n, format, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("CastDecodeKernel");
  return absl::OkStatus();
}

absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, Stream stream) {
  if (k == 0) return absl::OkStatus();
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Grid(k, &grid));
  SparseDecodeKernel<<<grid, kThreads, 0, stream>>>(indices, values, k, format, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("SparseDecodeKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
