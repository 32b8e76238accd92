#include "gradwire/kernels/dispatch.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/randomk.h"
#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cpu/sparse_sum.h"
#include "gradwire/kernels/cpu/topk.h"
#include "gradwire/kernels/cpu/varint_average.h"
#include "gradwire/kernels/cuda/cast.h"
#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/cuda/divide.h"
#include "gradwire/kernels/cuda/quantize.h"
#include "gradwire/kernels/cuda/randomk.h"
#include "gradwire/kernels/cuda/sparse.h"
#include "gradwire/kernels/cuda/sparse_sum.h"
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

// A selection call's common arguments (top-k, approximate top-k and
// random-k). Random-k's indices-only call has no gradient and no values:
// it passes temp for the one and indices for the other.
struct Selection {
  const char* who;
  void* temp;
  uint64_t* temp_bytes;
  uint64_t n, k;
  ValueFormat format;
  const void* grad;
  const void* indices;
  const void* values;
  bool indices_optional = false;        // random-k's compress: values only when null
  bool outputs_may_be_in_temp = false;  // top-k: where TopKOutputsInTemp puts them
};

// The shape, then (unless this is the size query, which needs no buffers)
// the buffers n and k need.
absl::Status CheckSelection(const Selection& s) {
  if (s.temp_bytes == nullptr) return Refuse(s.who, "temp_bytes is null");
  if (!KnownFormat(s.format)) return Refuse(s.who, "unknown value format");
  if (s.k > s.n) return Refuse(s.who, "k > n");
  if (s.n > (uint64_t{1} << 32)) return Refuse(s.who, "n > 2^32 (u32 indices)");
  if (s.temp == nullptr) return absl::OkStatus();  // the size query
  if (s.n > 0 && s.grad == nullptr) return Refuse(s.who, "grad is null");
  if (s.k > 0 && ((s.indices == nullptr && !s.indices_optional) || s.values == nullptr)) {
    return Refuse(s.who, s.indices_optional ? "values is null" : "indices or values is null");
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

namespace {

using dispatch_internal::Place;

// What every entry point does once its arguments are checked: run
// `on_host()` (the CPU reference, which returns nothing) or `on_device()`
// where `buffers` live.
// A stand-in device (Runtime::launch set) gets `on_host` bound to its
// arguments, so on_host must capture by value.
template <typename OnHost, typename OnDevice>
absl::Status Run(const char* who, std::initializer_list<const void*> buffers, cuda::Stream stream,
                 const OnHost& on_host, const OnDevice& on_device) {
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, buffers, &where));
  if (where == Location::kDevice) {
    const dispatch_internal::Runtime* runtime = g_runtime.load(std::memory_order_acquire);
    if (runtime->launch != nullptr) return runtime->launch(stream, who, on_host);
    return on_device();
  }
  on_host();
  return absl::OkStatus();
}

// With s.outputs_may_be_in_temp (top-k), a shape CheckSelection passed
// and buffers to write: the outputs are the caller's own, apart from
// temp, or exactly the ones TopKOutputsInTemp names inside it
// (*in_temp). Any other overlap with temp is refused (the kernel would
// overwrite its own lists).
absl::Status CheckOutputsBesideTemp(const Selection& s, bool* in_temp) {
  *in_temp = false;
  if (!s.outputs_may_be_in_temp || s.k == 0) return absl::OkStatus();
  const OutputsInTemp there = cpu::TopKOutputsInTemp(s.temp, s.n);
  if (s.indices == there.indices && s.values == there.values) {
    *in_temp = true;
    return absl::OkStatus();
  }
  const uintptr_t lo = reinterpret_cast<uintptr_t>(s.temp), hi = lo + *s.temp_bytes;
  auto overlaps = [lo, hi](const void* p, uint64_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return p != nullptr && a < hi && lo < a + bytes;
  };
  if (overlaps(s.indices, s.k * sizeof(uint32_t)) ||
      overlaps(s.values, s.k * ValueWidth(s.format))) {
    return Refuse(s.who, "indices or values overlap temp (other than TopKHostOutputsInTemp's)");
  }
  return absl::OkStatus();
}

// The same for the selections, which take CUB-style temp storage, after
// CheckSelection: the size query (temp == nullptr) locates nothing and
// answers what either side needs, so one buffer serves both; the host's
// temp size is checked. on_host(temp, temp_bytes) and
// on_device(temp, temp_bytes) make the call; `residual`, `stats` and
// `band` are the call's other buffers (null if it has none).
template <typename OnHost, typename OnDevice>
absl::Status RunSelection(const Selection& s, const void* residual, const void* stats,
                          const void* band, cuda::Stream stream, const OnHost& on_host,
                          const OnDevice& on_device) {
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSelection(s));
  const dispatch_internal::Runtime* runtime = g_runtime.load(std::memory_order_acquire);
  if (s.temp == nullptr) {
    uint64_t host = 0, device = 0;
    on_host(nullptr, &host);
    if (DeviceCount() > 0 && runtime->launch == nullptr) {
      GRADWIRE_KERNELS_RETURN_IF_ERROR(on_device(nullptr, &device));
    }
    *s.temp_bytes = std::max(host, device);
    return absl::OkStatus();
  }
  bool in_temp = false;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckOutputsBesideTemp(s, &in_temp));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      Place(s.who, {s.temp, s.grad, s.indices, s.values, residual, stats, band}, &where));
  if (where == Location::kDevice && runtime->launch == nullptr) {
    if (in_temp) {
      return Refuse(s.who, "outputs inside temp are the CPU kernels' layout (host buffers only)");
    }
    return on_device(s.temp, s.temp_bytes);
  }
  // The CPU references trust their temp size: check it for them (each
  // answers its own size query).
  uint64_t host_need = 0;
  on_host(nullptr, &host_need);
  if (*s.temp_bytes < host_need) return Refuse(s.who, "temp storage too small");
  if (where == Location::kDevice) {
    void* temp = s.temp;
    uint64_t bytes = *s.temp_bytes;
    return runtime->launch(stream, s.who,
                           [on_host, temp, bytes]() mutable { on_host(temp, &bytes); });
  }
  on_host(s.temp, s.temp_bytes);
  return absl::OkStatus();
}

}  // namespace

// -------------------------------------------------------------- selection --

OutputsInTemp TopKHostOutputsInTemp(void* temp, uint64_t n) {
  return cpu::TopKOutputsInTemp(temp, n);
}

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  return RunSelection(
      {"TopKCompress", temp, temp_bytes, n, k, format, grad, indices, values, false, true},
      residual, stats, nullptr, stream,
      [=](void* t, uint64_t* b) {
        cpu::TopKCompress(t, b, grad, residual, n, k, format, indices, values, stats);
      },
      [&](void* t, uint64_t* b) {
        return cuda::TopKCompress(t, b, grad, residual, n, k, format, indices, values, stats,
                                  stream);
      });
}

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, cuda::Stream stream) {
  return RunSelection(
      {"ApproxTopKCompress", temp, temp_bytes, n, k, format, grad, indices, values, false, true},
      residual, stats, band, stream,
      [=](void* t, uint64_t* b) {
        cpu::ApproxTopKCompress(t, b, grad, residual, n, k, format, indices, values, stats, band);
      },
      [&](void* t, uint64_t* b) {
        return cuda::ApproxTopKCompress(t, b, grad, residual, n, k, format, indices, values, stats,
                                        band, stream);
      });
}

absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices, cuda::Stream stream) {
  return RunSelection(
      {"RandomKIndices", temp, temp_bytes, n, k, ValueFormat::kFp32, temp, indices, indices},
      nullptr, nullptr, nullptr, stream,
      [=](void* t, uint64_t* b) { cpu::RandomKIndices(t, b, seed, step, n, k, indices); },
      [&](void* t, uint64_t* b) {
        return cuda::RandomKIndices(t, b, seed, step, n, k, indices, stream);
      });
}

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, cuda::Stream stream) {
  return RunSelection(
      {"RandomKCompress", temp, temp_bytes, n, k, format, grad, indices, values, true}, residual,
      stats, nullptr, stream,
      [=](void* t, uint64_t* b) {
        cpu::RandomKCompress(t, b, grad, residual, n, k, seed, step, format, indices, values,
                             stats);
      },
      [&](void* t, uint64_t* b) {
        return cuda::RandomKCompress(t, b, grad, residual, n, k, seed, step, format, indices,
                                     values, stats, stream);
      });
}

// ------------------------------------------------------------ quantizers --

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, cuda::Stream stream) {
  const char* who = "QsgdCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, bits, bucket_size, grad, scales, packed));
  return Run(
      who, {grad, residual, scales, packed, stats}, stream,
      [=] {
        cpu::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed, stats);
      },
      [&] {
        return cuda::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed,
                                  stats, stream);
      });
}

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          cuda::Stream stream) {
  const char* who = "SignCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, 1, bucket_size, grad, scales, packed));
  return Run(
      who, {grad, residual, scales, packed, stats}, stream,
      [=] { cpu::SignCompress(grad, residual, n, bucket_size, scales, packed, stats); },
      [&] {
        return cuda::SignCompress(grad, residual, n, bucket_size, scales, packed, stats, stream);
      });
}

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  const char* who = "CastCompress";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, n, format, grad, values));
  return Run(
      who, {grad, residual, values, stats}, stream,
      [=] { cpu::CastCompress(grad, residual, n, format, values, stats); },
      [&] { return cuda::CastCompress(grad, residual, n, format, values, stats, stream); });
}

absl::Status CastCompressInChunks(
    const float* grad, float* residual, uint64_t n, ValueFormat format, uint8_t* values,
    FusedStats* stats, absl::FunctionRef<void(const uint8_t* chunk, uint64_t bytes)> written) {
  const char* who = "CastCompressInChunks";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, n, format, grad, values));
  Location where;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(Place(who, {grad, residual, values, stats}, &where));
  if (where != Location::kHost) return Refuse(who, "host memory only");
  cpu::CastCompressInChunks(grad, residual, n, format, values, stats, written);
  return absl::OkStatus();
}

// -------------------------------------------------------------- decoders --

absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, cuda::Stream stream) {
  const char* who = "SparseDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, k, format, values, dense));
  if (k > 0 && indices == nullptr) return Refuse(who, "null buffer");
  return Run(
      who, {indices, values, dense}, stream,
      [=] { cpu::SparseDecodeAccumulate(indices, values, k, format, dense); },
      [&] { return cuda::SparseDecodeAccumulate(indices, values, k, format, dense, stream); });
}

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  cuda::Stream stream) {
  const char* who = "QsgdDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, bits, bucket_size, dense, scales, packed));
  return Run(
      who, {scales, packed, dense}, stream,
      [=] { cpu::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense); },
      [&] {
        return cuda::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense, stream);
      });
}

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense, cuda::Stream stream) {
  const char* who = "SignDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckQuantize(who, n, 1, bucket_size, dense, scales, packed));
  return Run(
      who, {scales, packed, dense}, stream,
      [=] { cpu::SignDecodeAccumulate(scales, packed, n, bucket_size, dense); },
      [&] { return cuda::SignDecodeAccumulate(scales, packed, n, bucket_size, dense, stream); });
}

absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, cuda::Stream stream) {
  const char* who = "CastDecodeAccumulate";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckDense(who, n, format, values, dense));
  return Run(
      who, {values, dense}, stream, [=] { cpu::CastDecodeAccumulate(values, n, format, dense); },
      [&] { return cuda::CastDecodeAccumulate(values, n, format, dense, stream); });
}

// ------------------------------------------------------------- averages --

namespace {

// Every buffer of a host-only call in host memory, none null where n > 0.
absl::Status CheckHostOnly(const char* who, uint64_t n, const float* out,
                           std::initializer_list<absl::Span<const uint8_t* const>> payloads) {
  // Buffer by buffer, nothing allocated: the averages run every step.
  auto check = [&](const void* b) {
    if (n > 0 && b == nullptr) return Refuse(who, "null buffer");
    Location where;
    GRADWIRE_KERNELS_RETURN_IF_ERROR(Locate(b, &where));
    if (where != Location::kHost) return Refuse(who, "host memory only");
    return absl::OkStatus();
  };
  GRADWIRE_KERNELS_RETURN_IF_ERROR(check(out));
  for (absl::Span<const uint8_t* const> p : payloads) {
    for (const uint8_t* b : p) GRADWIRE_KERNELS_RETURN_IF_ERROR(check(b));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CastDecodeAverage(absl::Span<const uint8_t* const> values, uint64_t n,
                               ValueFormat format, float divisor, float* out) {
  const char* who = "CastDecodeAverage";
  if (!KnownFormat(format)) return Refuse(who, "unknown value format");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, n, out, {values}));
  cpu::CastDecodeAverage(values.data(), values.size(), n, format, divisor, out);
  return absl::OkStatus();
}

absl::Status RandomKDecodeAverage(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                                  uint64_t n, uint64_t k, absl::Span<const uint8_t* const> values,
                                  ValueFormat format, float divisor, float* out) {
  const char* who = "RandomKDecodeAverage";
  if (temp_bytes == nullptr) return Refuse(who, "temp_bytes is null");
  if (!KnownFormat(format)) return Refuse(who, "unknown value format");
  if (k > n) return Refuse(who, "k > n");
  if (n > (uint64_t{1} << 32)) return Refuse(who, "n > 2^32 (u32 indices)");
  if (temp == nullptr) {  // the size query
    cpu::RandomKDecodeAverage(nullptr, temp_bytes, seed, step, n, k, nullptr, 0, format, divisor,
                              nullptr);
    return absl::OkStatus();
  }
  if (!(divisor > 0.0f) || !IsFinite(divisor)) return Refuse(who, "divisor must be positive");
  uint64_t need = 0;
  cpu::RandomKDecodeAverage(nullptr, &need, seed, step, n, k, nullptr, 0, format, divisor, nullptr);
  if (*temp_bytes < need) return Refuse(who, "temp storage too small");
  const uint8_t* const scratch[] = {static_cast<const uint8_t*>(temp)};
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, n, out, {values, scratch}));
  cpu::RandomKDecodeAverage(temp, temp_bytes, seed, step, n, k, values.data(), values.size(),
                            format, divisor, out);
  return absl::OkStatus();
}

absl::Status QsgdDecodeAverage(absl::Span<const uint8_t* const> scales,
                               absl::Span<const uint8_t* const> packed, uint64_t n, uint32_t bits,
                               uint32_t bucket_size, float divisor, float* out) {
  const char* who = "QsgdDecodeAverage";
  if (bits < 1 || bits > 8) return Refuse(who, "bits must be 1..8");
  if (bucket_size < 1) return Refuse(who, "bucket_size must be >= 1");
  if (scales.size() != packed.size()) return Refuse(who, "one scales and one packed per payload");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, n, out, {scales, packed}));
  cpu::QsgdDecodeAverage(scales.data(), packed.data(), scales.size(), n, bits, bucket_size, divisor,
                         out);
  return absl::OkStatus();
}

absl::Status SignDecodeAverage(absl::Span<const uint8_t* const> scales,
                               absl::Span<const uint8_t* const> packed, uint64_t n,
                               uint32_t bucket_size, float divisor, float* out) {
  const char* who = "SignDecodeAverage";
  if (bucket_size < 1) return Refuse(who, "bucket_size must be >= 1");
  if (scales.size() != packed.size()) return Refuse(who, "one scales and one packed per payload");
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, n, out, {scales, packed}));
  cpu::SignDecodeAverage(scales.data(), packed.data(), scales.size(), n, bucket_size, divisor, out);
  return absl::OkStatus();
}

absl::Status DivideAll(float* values, uint64_t n, float divisor, cuda::Stream stream) {
  const char* who = "DivideAll";
  if (n > 0 && values == nullptr) return Refuse(who, "null buffer");
  return Run(
      who, {values}, stream, [=] { cpu::DivideAll(values, n, divisor); },
      [&] { return cuda::DivideAll(values, n, divisor, stream); });
}

namespace {

// The checks of a sparse average's arguments (formats, null buffers, one
// side of memory for all); where they live into *where_out.
absl::Status CheckSparseAverage(const char* who, absl::Span<const SparsePayload> payloads,
                                absl::Span<float> dense, Location* where_out) {
  Location where = Location::kHost;
  for (size_t r = 0; r <= payloads.size(); ++r) {
    const SparsePayload* p = r < payloads.size() ? &payloads[r] : nullptr;
    if (p != nullptr && !KnownFormat(p->format)) return Refuse(who, "unknown value format");
    if (p != nullptr && p->count > 0 && (p->indices == nullptr || p->values == nullptr)) {
      return Refuse(who, "null buffer");
    }
    Location here;
    GRADWIRE_KERNELS_RETURN_IF_ERROR(
        Place(who, {dense.data(), p ? p->indices : nullptr, p ? p->values : nullptr}, &here));
    if (r > 0 && here != where && (p == nullptr || p->count > 0)) {
      return Refuse(who, "buffers are split between host and device memory");
    }
    where = here;
  }
  *where_out = where;
  return absl::OkStatus();
}

}  // namespace

absl::Status SparseAverage(absl::Span<const SparsePayload> payloads, float divisor,
                           absl::Span<float> dense, cuda::Stream stream) {
  const char* who = "SparseAverage";
  Location where = Location::kHost;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckSparseAverage(who, payloads, dense, &where));
  if (where == Location::kHost) {
    cpu::SparseAverage(payloads, divisor, dense);  // allocates nothing
    return absl::OkStatus();
  }
  const dispatch_internal::Runtime* runtime = g_runtime.load(std::memory_order_acquire);
  if (runtime->launch != nullptr) {
    std::vector<SparsePayload> copy(payloads.begin(), payloads.end());
    return runtime->launch(stream, who,
                           [copy, divisor, dense] { cpu::SparseAverage(copy, divisor, dense); });
  }
  SparseSumOptions sum;
  sum.accumulate = false;
  sum.scale = 1.0f;
  GRADWIRE_KERNELS_RETURN_IF_ERROR(
      cuda::SparseSumToDense(payloads, dense.data(), dense.size(), sum, nullptr, stream));
  return cuda::DivideAll(dense.data(), dense.size(), divisor, stream);
}

absl::Status DeltaVarintAverage(absl::Span<const DeltaVarintPayload> payloads, float divisor,
                                absl::Span<float> dense) {
  const char* who = "DeltaVarintAverage";
  GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, 0, dense.data(), {}));
  for (const DeltaVarintPayload& p : payloads) {
    if (!KnownFormat(p.format)) return Refuse(who, "unknown value format");
    if (p.count > 0 && (p.index_bytes == nullptr || p.values == nullptr)) {
      return Refuse(who, "null buffer");
    }
    GRADWIRE_KERNELS_RETURN_IF_ERROR(CheckHostOnly(who, 0, nullptr, {{p.index_bytes, p.values}}));
  }
  cpu::DeltaVarintAverage(payloads, divisor, dense, cpu::StoresFor(dense.size() * sizeof(float)));
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace gradwire
