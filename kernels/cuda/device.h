// What CUDA devices this process can use, and a probe that runs a kernel.
//
// Everything here works in a build without CUDA (it reports no devices), so
// callers never need #ifdefs: GPU paths are chosen at run time.
#ifndef GRADWIRE_KERNELS_CUDA_DEVICE_H_
#define GRADWIRE_KERNELS_CUDA_DEVICE_H_

#include <cstddef>
#include <string>

namespace gradwire {
namespace kernels {
namespace cuda {

// True when gradwire was built with nvcc (the kernels exist in the binary).
bool BuiltWithCuda();

// Number of usable CUDA devices; 0 without a driver, a GPU, or a CUDA build.
// `why_none`, when not null, receives the reason there are none.
int DeviceCount(std::string* why_none = nullptr);

// Copies `in` to the device, runs `out[i] = in[i] * 2 + 1` in a kernel and
// copies the result back. Returns an empty string on success, else the CUDA
// error. Proves the nvcc-built code actually runs on this machine's GPU.
std::string ProbeAffineKernel(const float* in, float* out, std::size_t n);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_DEVICE_H_
