#include <cuda_runtime.h>

#include <string>

#include "gradwire/kernels/cuda/cuda_status.h"
#include "gradwire/kernels/cuda/launch.cuh"
#include "gradwire/kernels/cuda/quantize.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr uint64_t kGroupMax = 4096;  // elements of one shared-memory group
// A group takes 9 bytes per element of shared memory (36 KB): 6 blocks fit
// an SM, so the grid is capped there and registers at 40 to let all run.
constexpr int kGroupBlocksPerSm = 6;

struct QuantParams {
  const float* grad;
  float* residual;  // null: no error feedback
  uint64_t n;
  uint32_t bits;  // 1 for sign
  uint32_t max_code;
  uint32_t bucket;
  uint64_t rounding;  // stream key of QSGD's stochastic rounding (RoundingKey's)
  uint8_t* scales;
  uint8_t* packed;
  FusedStats* stats;  // device, or null
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
  __device__ float Scale() const {
    return finite > 0 ? static_cast<float>(sum / static_cast<double>(finite)) : 0.0f;
  }
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
__device__ __forceinline__ uint32_t Encode(const QuantParams& p, uint64_t i, float a, float scale,
                                           float* decoded) {
  if (kSign) {
    const uint32_t c = SignCode(a);
    *decoded = SignDecode(c, scale);
    return c;
  }
  const float u = UnitFloat(RoundingHash(MakeElementKey(p.rounding, 32), i));
  const uint32_t c = QsgdQuantizeScaled(a, scale, p.max_code, u);
  *decoded = QsgdDequantize(c, scale, p.max_code);
  return c;
}

// Writes the packed bytes of the 8-element unit starting at element i0
// (a multiple of 8, so its codes start on a byte), `count` <= 8 codes.
__device__ __forceinline__ void StoreUnit(uint8_t* packed, uint64_t i0, uint32_t bits,
                                          uint64_t word, uint32_t count) {
  const uint64_t off = i0 / 8 * bits;
  const uint32_t bytes = (count * bits + 7) / 8;
  for (uint32_t b = 0; b < bytes; ++b) packed[off + b] = static_cast<uint8_t>(word >> (8 * b));
}

// One pass: groups of whole buckets (group_elems a multiple of 8 and of the
// bucket size, except the tensor's last group).
template <bool kSign, typename ScaleAcc>
__global__ void __launch_bounds__(kThreads, kGroupBlocksPerSm)
    QuantizeGroupsKernel(QuantParams p, uint64_t group_elems) {
  extern __shared__ float smem[];
  float* acc = smem;                  // group_elems
  float* scale = smem + group_elems;  // buckets per group (<= group_elems)
  uint8_t* codes = reinterpret_cast<uint8_t*>(smem + 2 * group_elems);  // group_elems
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
        const uint32_t end =
            static_cast<uint32_t>(Min64(static_cast<uint64_t>(b + 1) * p.bucket, len));
        for (uint32_t j = b * p.bucket; j < end; ++j) s.Add(acc[j]);
        scale[b] = s.Scale();
        StoreValue(p.scales, start / p.bucket + b, s.Scale(), ValueFormat::kFp32);
      }
    } else {
      const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      for (uint32_t b = warp; b < buckets; b += kWarps) {
        ScaleAcc s;
        const uint32_t end =
            static_cast<uint32_t>(Min64(static_cast<uint64_t>(b + 1) * p.bucket, len));
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
      codes[j] =
          static_cast<uint8_t>(Encode<kSign>(p, start + j, a, scale[j / p.bucket], &decoded));
      if (p.residual != nullptr) p.residual[start + j] = ResidualAfter(a, decoded);
    }
    __syncthreads();
    // Packing: 8 codes (whole bytes) per thread.
    for (uint32_t u = threadIdx.x; u < CeilDiv(len, 8); u += kThreads) {
      const uint32_t j0 = 8 * u;
      const uint32_t count = static_cast<uint32_t>(Min64(8, len - j0));
      uint64_t word = 0;
      for (uint32_t e = 0; e < count; ++e)
        word |= static_cast<uint64_t>(codes[j0 + e]) << (e * p.bits);
      StoreUnit(p.packed, start + j0, p.bits, word, count);
    }
    __syncthreads();  // acc and scale are reused by the next group
  }
  WriteSelected(p.stats, p.n);
  AddBlockCount(NonFiniteCounter(p.stats), nonfinite);
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
        if (i < end)
          stage[threadIdx.x] = p.residual != nullptr ? p.grad[i] + p.residual[i] : p.grad[i];
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
  WriteSelected(p.stats, p.n);
  AddBlockCount(NonFiniteCounter(p.stats), nonfinite);
}

template <bool kSign>
__global__ void __launch_bounds__(kThreads)
    DequantizeAccumulateKernel(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                               uint32_t bits, uint32_t bucket, float* dense) {
  const uint32_t max_code = QsgdMaxCode(bits);
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const float scale = LoadValue(scales, i / bucket, ValueFormat::kFp32);
    const uint32_t code = ReadPackedCode(packed, i, bits);
    dense[i] += kSign ? SignDecode(code, scale) : QsgdDequantize(code, scale, max_code);
  }
}

// Everything a refused call is refused for, checked before anything is
// written (stats included).
absl::Status CheckQuantize(const char* who, const QuantParams& p) {
  if (p.bits < 1 || p.bits > 8) {
    return absl::InvalidArgumentError(std::string(who) + ": bits must be 1..8");
  }
  if (p.bucket < 1) {
    return absl::InvalidArgumentError(std::string(who) + ": bucket_size must be >= 1");
  }
  if (p.n > 0 && (p.grad == nullptr || p.scales == nullptr || p.packed == nullptr)) {
    return absl::InvalidArgumentError(std::string(who) + ": null buffer");
  }
  return absl::OkStatus();
}

template <bool kSign, typename ScaleAcc>
absl::Status Quantize(const char* who, const QuantParams& p, cudaStream_t stream) {
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, p));
  GRADWIRE_KERNELS_RETURN_IF_ERROR(ZeroStats(p.stats, stream));
  if (p.n == 0) return absl::OkStatus();
  // Smallest group of whole buckets starting on a byte: a multiple of 8
  // elements; then as many of those as fit kGroupMax.
  uint64_t unit = p.bucket;
  while (unit % 8 != 0) unit += p.bucket;
  unsigned grid = 0;
  if (unit <= kGroupMax) {
    const uint64_t group = kGroupMax / unit * unit;
    const size_t smem = 2 * group * sizeof(float) + group;  // acc, scales (<= group), codes
    GRADWIRE_KERNELS_RETURN_IF_ERROR(
        GridFor(CeilDiv(p.n, group) * kThreads, kThreads, kGroupBlocksPerSm, &grid));
    QuantizeGroupsKernel<kSign, ScaleAcc><<<grid, kThreads, smem, stream>>>(p, group);
    GRADWIRE_CUDA_CHECK_LAUNCH("QuantizeGroupsKernel");
    return absl::OkStatus();
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(CeilDiv(p.n, p.bucket) * kThreads, kThreads, 8, &grid));
  BucketScaleKernel<ScaleAcc><<<grid, kThreads, 0, stream>>>(p);
  GRADWIRE_CUDA_CHECK_LAUNCH("BucketScaleKernel");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(CeilDiv(p.n, 8), kThreads, 8, &grid));
  QuantizeUnitsKernel<kSign><<<grid, kThreads, 0, stream>>>(p);
  GRADWIRE_CUDA_CHECK_LAUNCH("QuantizeUnitsKernel");
  return absl::OkStatus();
}

template <bool kSign>
absl::Status Dequantize(const char* who, const uint8_t* scales, const uint8_t* packed, uint64_t n,
                        uint32_t bits, uint32_t bucket_size, float* dense, cudaStream_t stream) {
  if (bits < 1 || bits > 8 || bucket_size < 1) {
    return absl::InvalidArgumentError(std::string(who) + ": bits must be 1..8, bucket_size >= 1");
  }
  if (n == 0) return absl::OkStatus();
  if (scales == nullptr || packed == nullptr || dense == nullptr) {
    return absl::InvalidArgumentError(std::string(who) + ": null buffer");
  }
  unsigned grid = 0;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(GridFor(n, kThreads, 8, &grid));
  DequantizeAccumulateKernel<kSign>
      <<<grid, kThreads, 0, stream>>>(scales, packed, n, bits, bucket_size, dense);
  GRADWIRE_CUDA_CHECK_LAUNCH("DequantizeAccumulateKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, Stream stream) {
  const uint32_t max_code = bits >= 1 && bits <= 8 ? QsgdMaxCode(bits) : 0;
  const QuantParams p{
      grad,   residual, n,    bits, max_code, bucket_size, StreamKey(seed, step, kStreamRounding),
      scales, packed,   stats};
  return Quantize<false, QsgdScaleAcc>("QsgdCompress", p, stream);
}

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats, Stream stream) {
  const QuantParams p{grad, residual, n, 1, 1, bucket_size, 0, scales, packed, stats};
  return Quantize<true, SignScaleAcc>("SignCompress", p, stream);
}

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  Stream stream) {
  return Dequantize<false>("QsgdDecodeAccumulate", scales, packed, n, bits, bucket_size, dense,
                           stream);
}

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense, Stream stream) {
  return Dequantize<true>("SignDecodeAccumulate", scales, packed, n, 1, bucket_size, dense, stream);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
