// Where a call's buffers live decides which implementation of a kernel runs.
//
// Each entry point below has the contract of its CPU reference in
// kernels/cpu/ (same arguments, same results bit for bit) plus a CUDA
// stream. The call runs where its non-null buffers live: host memory runs
// the CPU reference synchronously (the stream is ignored), device memory
// runs the CUDA kernel asynchronously on `stream`. Null buffers live
// nowhere and do not vote (an empty PyTorch CUDA tensor has a null data
// pointer), so n = 0 with a null gradient and device temp/stats runs on the
// device; a call with no non-null buffer runs on the host. Every non-null
// buffer, stats and temp included, must live in the same place: mixing is
// InvalidArgument, never a crash. Each distinct buffer is located once per
// call, and the device count once per process. If the CUDA runtime cannot
// say where a buffer lives (a sticky error left by a failed kernel, say),
// the call returns that error: a device pointer never reaches the CPU.
//
// Both paths check their arguments before touching memory: null buffers
// that n or k need, k > n, n > 2^32 where indices are u32, too little temp
// storage, unknown formats are InvalidArgument. The size query
// (temp == nullptr) locates nothing and answers the larger of the two
// sides' needs when a GPU is present, so one buffer serves either side.
#ifndef GRADWIRE_KERNELS_DISPATCH_H_
#define GRADWIRE_KERNELS_DISPATCH_H_

#include <cstdint>
#include <functional>
#include <initializer_list>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {

enum class Location {
  kHost,    // memory the CPU reads: ordinary, pinned or managed; the CPU reference runs
  kDevice,  // CUDA device memory: the CUDA kernel runs
};

// Where `ptr` lives, from the CUDA runtime (kHost for a null pointer, in a
// build without CUDA and on a machine without a GPU). When the runtime
// fails to answer, returns its error (Internal, naming it) and leaves
// *where unchanged.
absl::Status Locate(const void* ptr, Location* where);

// The same for display: kHost also when the runtime fails to answer. Never
// use this to decide where to run; the entry points below do not.
Location Locate(const void* ptr);

absl::Status TopKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                          uint64_t n, uint64_t k, ValueFormat format, uint32_t* indices,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status ApproxTopKCompress(void* temp, uint64_t* temp_bytes, const float* grad,
                                float* residual, uint64_t n, uint64_t k, ValueFormat format,
                                uint32_t* indices, uint8_t* values, FusedStats* stats,
                                ApproxTopKBand* band, cuda::Stream stream = nullptr);

// Where TopKCompress and ApproxTopKCompress may leave their k outputs when
// they run on the host: inside `temp` (host memory of the size query's
// bytes for n), over the candidate lists that their last step compacts in
// place (kernels/cpu/topk.h, TopKOutputsInTemp); valid until temp is used
// again. Passing these as `indices` and `values` spares the caller a
// buffer of k outputs and the reads from memory of its lines. Host temp
// only: the CUDA kernels lay theirs out otherwise, and refuse these.
// Other outputs that overlap temp are refused.
OutputsInTemp TopKHostOutputsInTemp(void* temp, uint64_t n);

// Indices only (a receiver's call).
absl::Status RandomKIndices(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                            uint64_t n, uint64_t k, uint32_t* indices,
                            cuda::Stream stream = nullptr);

// `indices` may be null: values only (a random-k frame carries none).
absl::Status RandomKCompress(void* temp, uint64_t* temp_bytes, const float* grad, float* residual,
                             uint64_t n, uint64_t k, uint64_t seed, uint64_t step,
                             ValueFormat format, uint32_t* indices, uint8_t* values,
                             FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                          uint8_t* packed, FusedStats* stats, cuda::Stream stream = nullptr);

absl::Status SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                          uint8_t* scales, uint8_t* packed, FusedStats* stats,
                          cuda::Stream stream = nullptr);

absl::Status CastCompress(const float* grad, float* residual, uint64_t n, ValueFormat format,
                          uint8_t* values, FusedStats* stats, cuda::Stream stream = nullptr);
// CastCompress a chunk at a time, `written` called with each chunk's
// values once they are written (cpu/cast.h CastCompressInChunks). Host
// memory only (InvalidArgument otherwise).
absl::Status CastCompressInChunks(
    const float* grad, float* residual, uint64_t n, ValueFormat format, uint8_t* values,
    FusedStats* stats, absl::FunctionRef<void(const uint8_t* chunk, uint64_t bytes)> written);

// Decoders.
absl::Status SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                                    ValueFormat format, float* dense,
                                    cuda::Stream stream = nullptr);
absl::Status QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bits, uint32_t bucket_size, float* dense,
                                  cuda::Stream stream = nullptr);
absl::Status SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                  uint32_t bucket_size, float* dense,
                                  cuda::Stream stream = nullptr);
absl::Status CastDecodeAccumulate(const uint8_t* values, uint64_t n, ValueFormat format,
                                  float* dense, cuda::Stream stream = nullptr);

// The host side of a dense codec's average, in one pass (cpu/cast.h
// CastDecodeAverage, cpu/quantize.h QsgdDecodeAverage and SignDecodeAverage): out = (zeros plus
// each payload's decoded values, in order) / divisor, the bits of zeroing,
// the DecodeAccumulate of each payload and DivideAll. Host memory only
// (InvalidArgument otherwise): on a device those three steps run instead.
absl::Status CastDecodeAverage(absl::Span<const uint8_t* const> values, uint64_t n,
                               ValueFormat format, float divisor, float* out);
// Random-k's average of payloads of one (seed, step) in one pass
// (cpu/randomk.h RandomKDecodeAverage): the bits of RandomKIndices and
// then SparseAverage over payloads sharing that index list, without
// writing the indices out. values[r] holds k values in `format`. Host
// memory only (InvalidArgument otherwise): on a device those two run
// instead. temp and temp_bytes as RandomKIndices' (null temp: the size
// query).
absl::Status RandomKDecodeAverage(void* temp, uint64_t* temp_bytes, uint64_t seed, uint64_t step,
                                  uint64_t n, uint64_t k, absl::Span<const uint8_t* const> values,
                                  ValueFormat format, float divisor, float* out);
absl::Status QsgdDecodeAverage(absl::Span<const uint8_t* const> scales,
                               absl::Span<const uint8_t* const> packed, uint64_t n, uint32_t bits,
                               uint32_t bucket_size, float divisor, float* out);
absl::Status SignDecodeAverage(absl::Span<const uint8_t* const> scales,
                               absl::Span<const uint8_t* const> packed, uint64_t n,
                               uint32_t bucket_size, float divisor, float* out);

// values[i] = values[i] / divisor for i < n, bit for bit on either side
// (cpu/divide_x86.h, cuda/divide.h): the division of an average.
absl::Status DivideAll(float* values, uint64_t n, float divisor, cuda::Stream stream = nullptr);

// dense = (sum of the payloads in order, from zero) / divisor, element by
// element (cpu/sparse_sum.h SparseAverage's contract; the device side
// sums with cuda::SparseSumToDense and then divides, the same bits). The
// payloads must be validated (indices strictly increasing, < dense.size()).
// The descriptor array is host memory; what it points to lives with dense.
absl::Status SparseAverage(absl::Span<const SparsePayload> payloads, float divisor,
                           absl::Span<float> dense, cuda::Stream stream = nullptr);

// SparseAverage's bits for payloads whose indices are still delta-varint
// coded, decoded as they are added (cpu/varint_average.h
// DeltaVarintAverage); dense's stores are chosen by its size (streaming
// past this core's part of the last-level cache). The index sections must
// be validated (lib's CheckDeltaVarintIndices). Host memory only
// (InvalidArgument otherwise).
absl::Status DeltaVarintAverage(absl::Span<const DeltaVarintPayload> payloads, float divisor,
                                absl::Span<float> dense);

namespace dispatch_internal {

// The two CUDA runtime queries dispatch makes, replaceable so that host
// tests can stand in for a GPU (or for a failing one) without one.
struct Runtime {
  int (*device_count)();                                     // asked once, then cached
  absl::Status (*locate)(const void* ptr, Location* where);  // non-null ptr only
  // Null for the CUDA runtime. A host stand-in for a GPU (host_device.h)
  // sets it: a call whose buffers are on its "device" hands `launch` the
  // CPU reference bound to its arguments, to run in `stream`'s order, and
  // returns what launch returns (an unknown stream, say).
  absl::Status (*launch)(cuda::Stream stream, const char* who,
                         std::function<void()> work) = nullptr;
};

// Installs `runtime` (nullptr: the CUDA runtime) and forgets the cached
// device count; returns the previous runtime. Tests only; not thread-safe.
const Runtime* SetRuntimeForTesting(const Runtime* runtime);

// Where a call with these buffers runs (the rule above), for tests.
absl::Status Place(const char* who, std::initializer_list<const void*> buffers, Location* where);

}  // namespace dispatch_internal

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_DISPATCH_H_
