// Where a buffer lives decides which implementation of a kernel runs.
#ifndef GRADWIRE_KERNELS_DISPATCH_H_
#define GRADWIRE_KERNELS_DISPATCH_H_

namespace gradwire {
namespace kernels {

enum class Location {
  kHost,    // ordinary (or pinned) host memory: the CPU reference runs
  kDevice,  // CUDA device memory: the CUDA kernel runs
};

// Asks the CUDA runtime where `ptr` lives. Host memory, a null pointer, a
// build without CUDA and a machine without a GPU all answer kHost.
Location Locate(const void* ptr);

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_DISPATCH_H_
