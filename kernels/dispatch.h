// Where a buffer lives decides which implementation of a kernel runs.
//
// Each entry point below has the contract of its CPU reference in
// kernels/cpu/ (same arguments, same results bit for bit) plus a CUDA
// stream. It asks Locate() where the gradient (or payload) lives: host
// memory runs the CPU reference synchronously (the stream is ignored),
// device memory runs the CUDA kernel asynchronously on `stream`. Every
// other non-null buffer of the call, stats and temp included, must live in
// the same place: mixing is InvalidArgument, never a crash. The size query
// (temp == nullptr) answers for the place the gradient lives.
#ifndef GRADWIRE_KERNELS_DISPATCH_H_
#define GRADWIRE_KERNELS_DISPATCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {

enum class Location {
  kHost,    // ordinary (or pinned) host memory: the CPU reference runs
  kDevice,  // CUDA device memory: the CUDA kernel runs
};

// Asks the CUDA runtime where `ptr` lives. Host memory, a null pointer, a
// build without CUDA and a machine without a GPU all answer kHost.
Location Locate(const void* ptr);

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, cuda::Stream stream = nullptr);

// Indices only: the buffer `indices` decides where it runs.
absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices,
                            cuda::Stream stream = nullptr);

absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          cuda::Stream stream = nullptr);

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream = nullptr);

// Decoders: `dense` decides where they run.
absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense,
                                    cuda::Stream stream = nullptr);
absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  cuda::Stream stream = nullptr);
absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense,
                                  cuda::Stream stream = nullptr);
absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, cuda::Stream stream = nullptr);

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_DISPATCH_H_
