#include "gradwire/kernels/dispatch.h"

#include <initializer_list>
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

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gradwire {
namespace kernels {

Location Locate(const void* ptr) {
#if GRADWIRE_HAVE_CUDA
  if (ptr == nullptr || cuda::DeviceCount() == 0) return Location::kHost;
  cudaPointerAttributes attrs;
  if (cudaPointerGetAttributes(&attrs, ptr) != cudaSuccess) {
    cudaGetLastError();  // unregistered host memory reports an error on old runtimes
    return Location::kHost;
  }
  return attrs.type == cudaMemoryTypeDevice ? Location::kDevice : Location::kHost;
#else
  (void)ptr;
  return Location::kHost;
#endif
}

namespace {

// Where the call runs: where `anchor` lives, provided every other non-null
// buffer lives there too.
absl::Status Place(const char* who, const void* anchor, std::initializer_list<const void*> others,
                   Location* where) {
  *where = Locate(anchor);
  if (*where == Location::kHost && cuda::DeviceCount() == 0)
    return absl::OkStatus();  // no GPU: all host
  for (const void* p : others) {
    if (p != nullptr && Locate(p) != *where) {
      return absl::InvalidArgumentError(std::string(who) +
                                        ": buffers are split between host and device memory");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("TopKCompress", grad, {temp, residual, indices, values, stats}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::TopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values,
                              stats, stream);
  }
  if (k > n) return absl::InvalidArgumentError("TopKCompress: k > n");
  cpu::TopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values, stats);
  return absl::OkStatus();
}

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, cuda::Stream stream) {
  Location where;
  absl::Status s =
      Place("ApproxTopKCompress", grad, {temp, residual, indices, values, stats, band}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::ApproxTopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values,
                                    stats, band, stream);
  }
  if (k > n) return absl::InvalidArgumentError("ApproxTopKCompress: k > n");
  cpu::ApproxTopKCompress(temp, temp_bytes, grad, residual, n, k, format, indices, values, stats,
                          band);
  return absl::OkStatus();
}

absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("RandomKIndices", indices, {temp}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice)
    return cuda::RandomKIndices(temp, temp_bytes, seed, step, n, k, indices, stream);
  if (k > n) return absl::InvalidArgumentError("RandomKIndices: k > n");
  cpu::RandomKIndices(temp, temp_bytes, seed, step, n, k, indices);
  return absl::OkStatus();
}

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("RandomKCompress", grad, {temp, residual, indices, values, stats}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::RandomKCompress(temp, temp_bytes, grad, residual, n, k, seed, step, format,
                                 indices, values, stats, stream);
  }
  if (k > n) return absl::InvalidArgumentError("RandomKCompress: k > n");
  cpu::RandomKCompress(temp, temp_bytes, grad, residual, n, k, seed, step, format, indices, values,
                       stats);
  return absl::OkStatus();
}

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("QsgdCompress", grad, {residual, scales, packed, stats}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed,
                              stats, stream);
  }
  if (bits < 1 || bits > 8 || bucket_size < 1) {
    return absl::InvalidArgumentError("QsgdCompress: bits must be 1..8, bucket_size >= 1");
  }
  cpu::QsgdCompress(grad, residual, n, bits, bucket_size, seed, step, scales, packed, stats);
  return absl::OkStatus();
}

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          cuda::Stream stream) {
  Location where;
  absl::Status s = Place("SignCompress", grad, {residual, scales, packed, stats}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::SignCompress(grad, residual, n, bucket_size, scales, packed, stats, stream);
  }
  if (bucket_size < 1) return absl::InvalidArgumentError("SignCompress: bucket_size must be >= 1");
  cpu::SignCompress(grad, residual, n, bucket_size, scales, packed, stats);
  return absl::OkStatus();
}

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("CastCompress", grad, {residual, values, stats}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice)
    return cuda::CastCompress(grad, residual, n, format, values, stats, stream);
  cpu::CastCompress(grad, residual, n, format, values, stats);
  return absl::OkStatus();
}

absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("SparseDecodeAccumulate", dense, {indices, values}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice)
    return cuda::SparseDecodeAccumulate(indices, values, k, format, dense, stream);
  cpu::SparseDecodeAccumulate(indices, values, k, format, dense);
  return absl::OkStatus();
}

absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  cuda::Stream stream) {
  Location where;
  absl::Status s = Place("QsgdDecodeAccumulate", dense, {scales, packed}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice) {
    return cuda::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense, stream);
  }
  if (bits < 1 || bits > 8 || bucket_size < 1) {
    return absl::InvalidArgumentError("QsgdDecodeAccumulate: bits must be 1..8, bucket_size >= 1");
  }
  cpu::QsgdDecodeAccumulate(scales, packed, n, bits, bucket_size, dense);
  return absl::OkStatus();
}

absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("SignDecodeAccumulate", dense, {scales, packed}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice)
    return cuda::SignDecodeAccumulate(scales, packed, n, bucket_size, dense, stream);
  if (bucket_size < 1)
    return absl::InvalidArgumentError("SignDecodeAccumulate: bucket_size must be >= 1");
  cpu::SignDecodeAccumulate(scales, packed, n, bucket_size, dense);
  return absl::OkStatus();
}

absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, cuda::Stream stream) {
  Location where;
  absl::Status s = Place("CastDecodeAccumulate", dense, {values}, &where);
  if (!s.ok()) return s;
  if (where == Location::kDevice)
    return cuda::CastDecodeAccumulate(values, n, format, dense, stream);
  cpu::CastDecodeAccumulate(values, n, format, dense);
  return absl::OkStatus();
}

}  // namespace kernels
}  // namespace gradwire
