#include <cuda_runtime.h>

#include "tests/gpu_test_util.h"

namespace gradwire {
namespace testing {
namespace {
std::string Why(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}
}  // namespace

std::string DeviceMalloc(void** ptr, size_t bytes) { return Why(cudaMalloc(ptr, bytes), "cudaMalloc"); }
void DeviceFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}
std::string CopyToDevice(void* dst, const void* src, size_t bytes) {
  return Why(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
std::string CopyToHost(void* dst, const void* src, size_t bytes) {
  return Why(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
std::string DeviceMemset(void* dst, int byte, size_t bytes) {
  return Why(cudaMemset(dst, byte, bytes), "cudaMemset");
}
std::string DeviceSynchronize() { return Why(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace testing
}  // namespace gradwire
