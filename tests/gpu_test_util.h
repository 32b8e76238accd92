// Small device-memory, stream and graph helpers for GPU tests, usable from
// ordinary .cc files (the CUDA calls live in gpu_test_util.cu; a build
// without CUDA gets stubs that fail). Tests first call
// GRADWIRE_SKIP_WITHOUT_GPU(), which prints "SKIPPED: no CUDA device (...)"
// and skips: never a silent pass.
#ifndef GRADWIRE_TESTS_GPU_TEST_UTIL_H_
#define GRADWIRE_TESTS_GPU_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/kernels/cuda/device.h"
#include "gradwire/kernels/cuda/stream.h"
#include "tests/test_seed.h"

// The CUDA runtime's graph handles, named without its headers (as
// kernels/cuda/stream.h names the stream).
struct CUgraph_st;
struct CUgraphExec_st;

namespace gradwire {
namespace testing {

// Each returns "" on success, else the CUDA error.
std::string DeviceMalloc(void** ptr, size_t bytes);
void DeviceFree(void* ptr);
std::string CopyToDevice(void* dst, const void* src, size_t bytes);
std::string CopyToHost(void* dst, const void* src, size_t bytes);
std::string DeviceMemset(void* dst, int byte, size_t bytes);
// Waits for all work and reports any asynchronous error from a kernel.
std::string DeviceSynchronize();

// The steps' errors, concatenated ("" when all succeeded). The steps are the
// braces' elements, which C++ evaluates left to right; the operands of a
// `+` chain it evaluates in any order, and GCC ran `Launch() +
// Synchronize()` as Synchronize first, so a test read its poison back
// (seen under compute-sanitizer, whose slower kernels lose that race):
//   ASSERT_EQ(InOrder({a.Poison(), DeviceSynchronize()}), "");
inline std::string InOrder(std::initializer_list<std::string> steps) {
  std::string errors;
  for (const std::string& e : steps) errors += e;
  return errors;
}
// Streaming multiprocessors of the current device (0 on error): tests size
// their inputs so that every block of a grid-stride kernel loops.
int MultiprocessorCount();
// The same as an element count's factor; fails the test on error.
#define GRADWIRE_GPU_SMS(sms)                                                             \
  const uint64_t sms = static_cast<uint64_t>(::gradwire::testing::MultiprocessorCount()); \
  ASSERT_GT(sms, 0u) << "cudaDeviceGetAttribute(MultiProcessorCount) failed"

// A stream created with cudaStreamNonBlocking: it does not synchronize with
// the legacy default stream, so work a kernel left on the default stream by
// mistake would race with it. Download() copies on the default stream:
// Synchronize() first. Movable, not copyable; destroys the stream.
class TestStream {
 public:
  TestStream();
  kernels::cuda::Stream get() const { return stream_.get(); }
  const std::string& error() const { return error_; }
  std::string Synchronize();

 private:
  struct Destroy {
    void operator()(CUstream_st* stream) const;
  };
  std::unique_ptr<CUstream_st, Destroy> stream_;
  std::string error_;
};

// A CUDA graph captured from the calls made on `stream` between Begin and
// End (global capture mode: any call that is not graph-safe fails the
// capture), instantiated by End, then replayed with Launch.
class TestGraph {
 public:
  std::string Begin(kernels::cuda::Stream stream);
  std::string End();
  std::string Launch();
  int nodes() const { return nodes_; }

 private:
  struct DestroyGraph {
    void operator()(CUgraph_st* graph) const;
  };
  struct DestroyExec {
    void operator()(CUgraphExec_st* exec) const;
  };
  kernels::cuda::Stream stream_ = nullptr;
  std::unique_ptr<CUgraph_st, DestroyGraph> graph_;    // cudaGraph_t
  std::unique_ptr<CUgraphExec_st, DestroyExec> exec_;  // cudaGraphExec_t
  int nodes_ = 0;
};

// A device array of T that frees itself. Poison() fills it with 0xFF bytes
// (NaN for floats, all-ones for integers) so unwritten outputs show up.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    error_ = DeviceMalloc(reinterpret_cast<void**>(&ptr_), n == 0 ? 1 : n * sizeof(T));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    if (error_.empty()) error_ = CopyToDevice(ptr_, host.data(), host.size() * sizeof(T));
  }
  ~DeviceArray() { DeviceFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  const std::string& error() const { return error_; }
  std::string Poison() { return DeviceMemset(ptr_, 0xFF, n_ * sizeof(T)); }
  std::string Upload(const std::vector<T>& host) {
    return CopyToDevice(ptr_, host.data(), std::min(n_, host.size()) * sizeof(T));
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    std::string e = CopyToHost(host.data(), ptr_, n_ * sizeof(T));
    if (!e.empty()) ADD_FAILURE() << e;
    return host;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
  std::string error_;
};

// GRADWIRE_GPU_QUICK=1 (set for compute-sanitizer runs, which are 10-100x
// slower) keeps sweeps to small sizes.
inline bool QuickMode() { return std::getenv("GRADWIRE_GPU_QUICK") != nullptr; }

// GRADWIRE_GPU_LARGE=1 enables the sizes near 2^32 (tens of GB).
inline bool LargeMode() { return std::getenv("GRADWIRE_GPU_LARGE") != nullptr; }

// Bitwise float equality (NaN == NaN with the same payload, +0 != -0).
inline bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The kernels' contract: the CPU's bits, except that any NaN equals any
// NaN. NaN payloads are not part of it: x86 returns a NaN operand's
// payload from an addition, the GPU its canonical NaN 0x7fffffff.
inline bool SameValue(float a, float b) { return SameBits(a, b) || (a != a && b != b); }

}  // namespace testing
}  // namespace gradwire

// GRADWIRE_SEEDED_RNG that also prints the seed when the test starts, so a
// run's log names the data of every test, passed or failed.
#define GRADWIRE_GPU_SEEDED_RNG(rng)                           \
  GRADWIRE_SEEDED_RNG(rng);                                    \
  std::printf("seed %llu (replay: GRADWIRE_TEST_SEED=%llu)\n", \
              static_cast<unsigned long long>(rng##_seed),     \
              static_cast<unsigned long long>(rng##_seed))

// Skips (printing SKIPPED) unless GRADWIRE_GPU_LARGE is set.
#define GRADWIRE_SKIP_UNLESS_LARGE(what)                                  \
  do {                                                                    \
    if (!::gradwire::testing::LargeMode()) {                              \
      std::printf("SKIPPED: set GRADWIRE_GPU_LARGE=1 to run %s\n", what); \
      GTEST_SKIP() << "GRADWIRE_GPU_LARGE not set";                       \
    }                                                                     \
  } while (0)

// The start of most GPU tests: skip without a device, then `rng`.
#define GRADWIRE_GPU_TEST(rng) \
  GRADWIRE_SKIP_WITHOUT_GPU(); \
  GRADWIRE_GPU_SEEDED_RNG(rng)

#define GRADWIRE_SKIP_WITHOUT_GPU()                                         \
  do {                                                                      \
    std::string gradwire_why_;                                              \
    if (::gradwire::kernels::cuda::DeviceCount(&gradwire_why_) == 0) {      \
      std::printf("SKIPPED: no CUDA device (%s)\n", gradwire_why_.c_str()); \
      GTEST_SKIP() << "no CUDA device: " << gradwire_why_;                  \
    }                                                                       \
  } while (0)

#endif  // GRADWIRE_TESTS_GPU_TEST_UTIL_H_
