#include <cuda_runtime.h>

#include <cstdint>

#include "gradwire/kernels/cuda/device.h"

namespace gradwire {
namespace kernels {
namespace cuda {
namespace {

__global__ void AffineKernel(const float* in, float* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i] * 2.0f + 1.0f;
  }
}

std::string Describe(cudaError_t err, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount(std::string* why_none) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_none != nullptr) *why_none = Describe(err, "cudaGetDeviceCount");
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  if (count == 0 && why_none != nullptr) *why_none = "no CUDA device present";
  return count;
}

std::string ProbeAffineKernel(const float* in, float* out, std::size_t n) {
  float* d_in = nullptr;
  float* d_out = nullptr;
  std::string error;
  const std::size_t bytes = n * sizeof(float);
  cudaError_t err = cudaMalloc(&d_in, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&d_out, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(d_in, in, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    AffineKernel<<<128, 256>>>(d_in, d_out, n);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) error = Describe(err, "ProbeAffineKernel");
  cudaFree(d_in);
  cudaFree(d_out);
  return error;
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
