#include "gradwire/kernels/dispatch.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/randomk.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/sparse.h"
#include "gradwire/kernels/cuda/topk.h"
#include "gradwire/kernels/validate.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gradwire {
namespace kernels {
namespace {

// ------------------------------------------------------- the CUDA runtime --

int CudaDeviceCount() { return cuda::DeviceCount(); }

absl::Status CudaLocate(const void* ptr, Location* where) {
#if GRADWIRE_HAVE_CUDA
  cudaPointerAttributes attrs;
  const cudaError_t err = cudaPointerGetAttributes(&attrs, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clears the error unless it is sticky (then it stays, as it should)
    return absl::InternalError(std::string("cudaPointerGetAttributes: ") + cudaGetErrorName(err) +
                               " (" + cudaGetErrorString(err) + ")");
  }
  // Managed memory is readable by the CPU: the reference runs on it.
  *where = attrs.type == cudaMemoryTypeDevice ? Location::kDevice : Location::kHost;
#else
  (void)ptr;
  *where = Location::kHost;
#endif
  return absl::OkStatus();
}

constexpr dispatch_internal::Runtime kCudaRuntime = {CudaDeviceCount, CudaLocate};
std::atomic<const dispatch_internal::Runtime*> g_runtime{&kCudaRuntime};
std::atomic<int> g_device_count{-1};  // -1: not asked yet

int DeviceCount() {
  int count = g_device_count.load(std::memory_order_acquire);
  if (count < 0) {
    count = g_runtime.load(std::memory_order_acquire)->device_count();
    g_device_count.store(count, std::memory_order_release);
  }
  return count;
}

// ------------------------------------------------------------ the checks --

absl::Status Refuse(const char* who, const char* what) {
  return absl::InvalidArgumentError(std::string(who) + ": " + what);
}

bool KnownFormat(ValueFormat f) {
  return f == ValueFormat::kFp32 || f == ValueFormat::kFp16 || f == ValueFormat::kBf16;
}

// Top-k, approximate top-k and random-k: the shape, then (unless this is
// the size query, which needs no buffers) the buffers n and k need.
absl::Status CheckSelection(const char* who, const void* temp, const uint64_t* temp_bytes,
                            uint64_t n, uint64_t k, ValueFormat format) {
  if (temp_bytes == nullptr) return Refuse(who, "temp_bytes is null");
  if (!KnownFormat(format)) return Refuse(who, "unknown value format");
  if (k > n) return Refuse(who, "k > n");
  if (n > (uint64_t{1} << 32)) return Refuse(who, "n > 2^32 (u32 indices)");
  return absl::OkStatus();
}

absl::Status CheckSelectionBuffers(const char* who, const void* temp, uint64_t n, uint64_t k,
                                   const void* grad, const void* indices, const void* values) {
  if (temp == nullptr) return absl::OkStatus();  // the size query
  if (n > 0 && grad == nullptr) return Refuse(who, "grad is null");
  if (k > 0 && (indices == nullptr || values == nullptr)) {
    return Refuse(who, "indices or values is null");
  }
  return absl::OkStatus();
}

absl::Status CheckQuantize(const char* who, uint64_t n, uint32_t bits, uint32_t bucket_size,
                           const void* in, const void* scales, const void* packed) {
  if (bits < 1 || bits > 8) return Refuse(who, "bits must be 1..8");
  if (bucket_size < 1) return Refuse(who, "bucket_size must be >= 1");
  if (n > 0 && (in == nullptr || scales == nullptr || packed == nullptr)) {
    return Refuse(who, "null buffer");
  }
  return absl::OkStatus();
}

absl::Status CheckDense(const char* who, uint64_t n, ValueFormat format, const void* in,
                        const void* out) {
  if (!KnownFormat(format)) return Refuse(who, "unknown value format");
  if (n > 0 && (in == nullptr || out == nullptr)) return Refuse(who, "null buffer");
  return absl::OkStatus();
}

// The size query: what either side needs, so one buffer serves both.
template <typename CpuQuery, typename CudaQuery>
absl::Status AnswerSizeQuery(uint64_t* temp_bytes, const CpuQuery& cpu_query,
                             const CudaQuery& cuda_query) {
  uint64_t host = 0, device = 0;
  cpu_query(&host);
  if (DeviceCount() > 0) GRADWIRE_KERNELS_RETURN_IF_ERROR(cuda_query(&device));
  *temp_bytes = std::max(host, device);
  return absl::OkStatus();
}

// The CPU references trust their temp size: check it for them.
absl::Status CheckHostTemp(const char* who, uint64_t have, uint64_t n) {
  uint64_t need = 0;
  cpu::TopKCompress(nullptr, &need, nullptr, nullptr, n, 0, ValueFormat::kFp32, nullptr, nullptr,
                    nullptr);
  return have >= need ? absl::OkStatus() : Refuse(who, "temp storage too small");
}

}  // namespace

// ------------------------------------------------------------- locating --

absl::Status Locate(const void* ptr, Location* where) {
  if (ptr == nullptr || DeviceCount() == 0) {
    *where = Location::kHost;
    return absl::OkStatus();
  }
  return g_runtime.load(std::memory_order_acquire)->locate(ptr, where);
}

Location Locate(const void* ptr) {
  Location where = Location::kHost;
  if (!Locate(ptr, &where).ok()) return Location::kHost;
  return where;
}

namespace dispatch_internal {

const Runtime* SetRuntimeForTesting(const Runtime* runtime) {
  const Runtime* previous = g_runtime.exchange(runtime != nullptr ? runtime : &kCudaRuntime);
  g_device_count.store(-1, std::memory_order_release);
  return previous;
}

absl::Status Place(const char* who, std::initializer_list<const void*> buffers, Location* where) {
  *where = Location::kHost;
  if (DeviceCount() == 0) return absl::OkStatus();  // no GPU: everything is host memory
  const Runtime* runtime = g_runtime.load(std::memory_order_acquire);
  const void* asked[8];
  int num_asked = 0;
  for (const void* p : buffers) {
    if (p == nullptr || std::find(asked, asked + num_asked, p) != asked + num_asked) continue;
    Location here;
    absl::Status s = runtime->locate(p, &here);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          std::string(who) + ": where a buffer lives: " + std::string(s.message()));
    }
    if (num_asked > 0 && here != *where) {
      return Refuse(who, "buffers are split between host and device memory");
    }
    *where = here;
    if (num_asked < 8) asked[num_asked++] = p;
  }
  return absl::OkStatus();
}

}  // namespace dispatch_internal

using dispatch_internal::Place;

// -------------------------------------------------------------- selection --

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  const char* who = "TopKCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelection(who, temp, temp_bytes, n, k, format));
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelectionBuffers(who, temp, n, k, grad, indices, values));
  if (temp == nullptr) {
    return AnswerSizeQuery(
        temp_bytes,
        [&](uint64_t* b) {
          cpu::TopKCompress(nullptr, b, grad, residual, n, k, format, indices, values, stats);
        },
        [&](uint64_t* b) {
          return cuda::TopKCompress(nullptr, b, grad, residual, n, k, format, indices, values,
                                    stats, stream);
        });
  }
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      Place(who, {temp, grad, residual, indices, values, stats}, &where));
  if (where == Location::kDevice) {
    return cuda::TopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values,
                              stats, stream);
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostTemp(who, *temp_bytes, n));
  cpu::TopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values, stats);
  return absl::OkStatus();
}

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, cuda::Stream stream) {
  const char* who = "ApproxTopKCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelection(who, temp, temp_bytes, n, k, format));
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelectionBuffers(who, temp, n, k, grad, indices, values));
  if (temp == nullptr) {
    return AnswerSizeQuery(
        temp_bytes,
        [&](uint64_t* b) {
          cpu::ApproxTopKCompress(nullptr, b, grad, residual, n, k, format, indices, values, stats,
                                  band);
        },
        [&](uint64_t* b) {
          return cuda::ApproxTopKCompress(nullptr, b, grad, residual, n, k, format, indices, values,
                                          stats, band, stream);
        });
  }
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      Place(who, {temp, grad, residual, indices, values, stats, band}, &where));
  if (where == Location::kDevice) {
    return cuda::ApproxTopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values,
                                    stats, band, stream);
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostTemp(who, *temp_bytes, n));
  cpu::ApproxTopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values, stats,
                          band);
  return absl::OkStatus();
}

absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices, cuda::Stream stream) {
  const char* who = "RandomKIndices";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelection(who, temp, temp_bytes, n, k, ValueFormat::kFp32));
  if (temp != nullptr && k > 0 && indices == nullptr) return Refuse(who, "indices is null");
  if (temp == nullptr) {
    return AnswerSizeQuery(
        temp_bytes,
        [&](uint64_t* b) { cpu::RandomKIndices(nullptr, b, seed, step, n, k, indices); },
        [&](uint64_t* b) {
          return cuda::RandomKIndices(nullptr, b, seed, step, n, k, indices, stream);
        });
  }
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {temp, indices}, &where));
  if (where == Location::kDevice) {
    return cuda::RandomKIndices(temp, temp_bytes, seed, step, n, k, indices, stream);
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostTemp(who, *temp_bytes, n));
  cpu::RandomKIndices(temp, temp_bytes, seed, step, n, k, indices);
  return absl::OkStatus();
}

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, cuda::Stream stream) {
  const char* who = "RandomKCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelection(who, temp, temp_bytes, n, k, format));
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelectionBuffers(who, temp, n, k, grad, indices, values));
  if (temp == nullptr) {
    return AnswerSizeQuery(
        temp_bytes,
        [&](uint64_t* b) {
          cpu::RandomKCompress(nullptr, b, grad, residual, n, k, seed, step, format, indices,
                               values, stats);
        },
        [&](uint64_t* b) {
          return cuda::RandomKCompress(nullptr, b, grad, residual, n, k, seed, step, format,
                                       indices, values, stats, stream);
        });
  }
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      Place(who, {temp, grad, residual, indices, values, stats}, &where));
  if (where == Location::kDevice) {
    return cuda::RandomKCompress(temp, temp_bytes, grad, residual, n, k, seed, step, format,
                                 indices, values, stats, stream);
  }
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostTemp(who, *temp_bytes, n));
  cpu::RandomKCompress(temp, temp_bytes, grad, residual, n, k, seed, step, format, indices, values,
                       stats);
  return absl::OkStatus();
}

// ------------------------------------------------------------ quantizers --

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, cuda::Stream stream) {
  const char* who = "QsgdCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, bits, bucket_size, grad, scales, packed));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {grad, residual, scales, packed, stats}, &where));
  if (where == Location::kDevice) {
    return cuda::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed,
                              stats, stream);
  }
  cpu::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed, stats);
  return absl::OkStatus();
}

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          cuda::Stream stream) {
  const char* who = "SignCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, 1, bucket_size, grad, scales, packed));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {grad, residual, scales, packed, stats}, &where));
  if (where == Location::kDevice) {
    return cuda::SignCompress(grad, residual, n, bucket_size, scales, packed, stats, stream);
  }
  cpu::SignCompress(grad, residual, n, bucket_size, scales, packed, stats);
  return absl::OkStatus();
}

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  const char* who = "CastCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, n, format, grad, values));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {grad, residual, values, stats}, &where));
  if (where == Location::kDevice) {
    return cuda::CastCompress(grad, residual, n, format, values, stats, stream);
  }
  cpu::CastCompress(grad, residual, n, format, values, stats);
  return absl::OkStatus();
}

// -------------------------------------------------------------- decoders --

absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, cuda::Stream stream) {
  const char* who = "SparseDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, k, format, values, dense));
  if (k > 0 && indices == nullptr) return Refuse(who, "null buffer");
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {indices, values, dense}, &where));
  if (where == Location::kDevice) {
    return cuda::SparseDecodeAccumulate(indices, values, k, format, dense, stream);
  }
  cpu::SparseDecodeAccumulate(indices, values, k, format, dense);
  return absl::OkStatus();
}

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  cuda::Stream stream) {
  const char* who = "QsgdDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, bits, bucket_size, dense, scales, packed));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {scales, packed, dense}, &where));
  if (where == Location::kDevice) {
    return cuda::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense, stream);
  }
  cpu::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense);
  return absl::OkStatus();
}

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense, cuda::Stream stream) {
  const char* who = "SignDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, 1, bucket_size, dense, scales, packed));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {scales, packed, dense}, &where));
  if (where == Location::kDevice) {
    return cuda::SignDecodeAccumulate(scales, packed, n, bucket_size, dense, stream);
  }
  cpu::SignDecodeAccumulate(scales, packed, n, bucket_size, dense);
  return absl::OkStatus();
}

absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, cuda::Stream stream) {
  const char* who = "CastDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, n, format, values, dense));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {values, dense}, &where));
  if (where == Location::kDevice) {
    return cuda::CastDecodeAccumulate(values, n, format, dense, stream);
  }
  cpu::CastDecodeAccumulate(values, n, format, dense);
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace gradwire
