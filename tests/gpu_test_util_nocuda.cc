// Without CUDA the GPU tests skip before calling any of these.
#include "tests/gpu_test_util.h"

namespace gradwire {
namespace testing {
namespace {
const char kNoCuda[] = "gradwire was built without CUDA";
}
std::string DeviceMalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return kNoCuda;
}
void DeviceFree(void*) {}
std::string CopyToDevice(void*, const void*, size_t) { return kNoCuda; }
std::string CopyToHost(void*, const void*, size_t) { return kNoCuda; }
std::string DeviceMemset(void*, int, size_t) { return kNoCuda; }
std::string DeviceSynchronize() { return kNoCuda; }
int MultiprocessorCount() { return 0; }

TestStream::TestStream() : error_(kNoCuda) {}
void TestStream::Destroy::operator()(CUstream_st*) const {}
std::string TestStream::Synchronize() { return kNoCuda; }

void TestGraph::DestroyGraph::operator()(CUgraph_st*) const {}
void TestGraph::DestroyExec::operator()(CUgraphExec_st*) const {}
std::string TestGraph::Begin(kernels::cuda::Stream) { return kNoCuda; }
std::string TestGraph::End() { return kNoCuda; }
std::string TestGraph::Launch() { return kNoCuda; }

}  // namespace testing
}  // namespace gradwire
