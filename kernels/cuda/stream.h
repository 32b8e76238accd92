// The CUDA stream and event types, usable from code compiled without CUDA headers.
//
// cuda_runtime.h defines `typedef struct CUstream_st* cudaStream_t`; naming
// the same incomplete struct here lets every kernels/cuda/*.h header take a
// stream without pulling CUDA into builds (or CPU-only callers) that have no
// toolkit. A cudaStream_t converts to Stream and back with no cast.
#ifndef GRADWIRE_KERNELS_CUDA_STREAM_H_
#define GRADWIRE_KERNELS_CUDA_STREAM_H_

struct CUstream_st;
struct CUevent_st;

namespace gradwire {
namespace kernels {
namespace cuda {

using Stream = CUstream_st*;  // nullptr is the legacy default stream
using Event = CUevent_st*;    // cudaEvent_t, likewise

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_STREAM_H_
