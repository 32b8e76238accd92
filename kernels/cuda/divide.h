// Dividing device floats in place: the division of an average (the CUDA
// side of kernels/cpu/divide_x86.h, the same bits: IEEE division, which
// nvcc's default -prec-div=true gives).
#ifndef GRADWIRE_KERNELS_CUDA_DIVIDE_H_
#define GRADWIRE_KERNELS_CUDA_DIVIDE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gradwire/kernels/cuda/stream.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// values[i] = values[i] / divisor for i < n (device memory), asynchronous
// on `stream`.
absl::Status DivideAll(float* values, uint64_t n, float divisor, Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_DIVIDE_H_
