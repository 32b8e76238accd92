// CUDA error codes as absl::Status, for .cu files only (needs the runtime).
//
// Every runtime call and every launch in kernels/cuda is checked through
// these: a failed call becomes an Internal status naming the call, never a
// silently ignored code.
#ifndef GRADWIRE_KERNELS_CUDA_CUDA_STATUS_H_
#define GRADWIRE_KERNELS_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "gradwire/kernels/validate.h"

namespace gradwire {
namespace kernels {
namespace cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

// Returns from the enclosing function if a CUDA call (or, after a launch,
// cudaGetLastError()) failed.
#define GRADWIRE_CUDA_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                           \
    ::absl::Status gradwire_cuda_status_ = ::gradwire::kernels::cuda::CudaStatus((expr), #expr); \
    if (!gradwire_cuda_status_.ok()) return gradwire_cuda_status_;                               \
  } while (0)

// Checks the launch just issued (configuration errors surface here).
#define GRADWIRE_CUDA_CHECK_LAUNCH(name) \
  GRADWIRE_CUDA_RETURN_IF_ERROR((static_cast<void>(name), cudaGetLastError()))

#endif  // GRADWIRE_KERNELS_CUDA_CUDA_STATUS_H_
