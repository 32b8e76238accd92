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

std::string DeviceMalloc(void** ptr, size_t bytes) {
  return Why(cudaMalloc(ptr, bytes), "cudaMalloc");
}
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

int MultiprocessorCount() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  return sms;
}

TestStream::TestStream() {
  cudaStream_t s = nullptr;
  error_ = Why(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_.reset(s);
}
void TestStream::Destroy::operator()(CUstream_st* stream) const { cudaStreamDestroy(stream); }
std::string TestStream::Synchronize() {
  return Why(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
}

void TestGraph::DestroyGraph::operator()(CUgraph_st* graph) const { cudaGraphDestroy(graph); }
void TestGraph::DestroyExec::operator()(CUgraphExec_st* exec) const { cudaGraphExecDestroy(exec); }
std::string TestGraph::Begin(kernels::cuda::Stream stream) {
  stream_ = stream;
  return Why(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
}
std::string TestGraph::End() {
  cudaGraph_t graph = nullptr;
  std::string e = Why(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  graph_.reset(graph);
  if (!e.empty()) return e;
  size_t nodes = 0;
  e = Why(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
  nodes_ = static_cast<int>(nodes);
  if (!e.empty()) return e;
  cudaGraphExec_t exec = nullptr;
  e = Why(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  exec_.reset(exec);
  return e;
}
std::string TestGraph::Launch() {
  return Why(cudaGraphLaunch(exec_.get(), stream_), "cudaGraphLaunch");
}

}  // namespace testing
}  // namespace gradwire
