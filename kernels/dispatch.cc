#include "gradwire/kernels/dispatch.h"

#include "gradwire/kernels/cuda/device.h"

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

}  // namespace kernels
}  // namespace gradwire
