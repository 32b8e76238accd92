// Stand-in used when gradwire is built without a CUDA toolkit.
#include "gradwire/kernels/cuda/device.h"

namespace gradwire {
namespace kernels {
namespace cuda {

bool BuiltWithCuda() { return false; }

int DeviceCount(std::string* why_none) {
  if (why_none != nullptr) *why_none = "gradwire was built without CUDA";
  return 0;
}

std::string ProbeAffineKernel(const float*, float*, std::size_t) {
  return "gradwire was built without CUDA";
}

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire
