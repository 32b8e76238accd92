// Sums P workers' sparse payloads into one dense buffer on the GPU.
//
// Deterministic by construction: the dense range is cut into tiles; each
// block loads a tile into shared memory, adds worker 0's entries for that
// tile, then worker 1's, ... in the fixed worker order, and writes the tile
// back once. Indices are strictly increasing within a worker (the wire
// format guarantees it; the kernel checks it, see below), so no two threads
// touch one element in the same round and no atomics are needed; every element sees the additions
// in the same order on every run, and in the same order as the CPU reference
// (kernels/cpu/sparse_sum.h), so the results are identical bit for bit.
//
// Bytes moved: 8 per entry read (u32 index + fp32 value) plus 4n written
// (8n when accumulating onto the buffer's old contents): the 4n + 8Pk floor.
#ifndef GRADWIRE_KERNELS_CUDA_SPARSE_SUM_H_
#define GRADWIRE_KERNELS_CUDA_SPARSE_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cuda/stream.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cuda {

// dense[i] = (start[i] + sum over workers w in order of v_w[i]) * scale,
// where start is dense's old contents if options.accumulate, else 0, and
// v_w[i] is worker w's value at i (absent entries add nothing). The
// payloads and `dense` are device memory; the payload descriptors
// themselves are a host array (passed to the kernel by value, 64 workers
// per launch; more workers take several launches in order). No temporary
// storage, no allocation, asynchronous on `stream`.
//
// What the host can see is checked on the host (InvalidArgument, nothing
// written: count > n, null buffers, unknown formats, n > 2^32). The indices
// live on the device and are checked there, in the same kernel: whatever
// they hold, no entry is written outside `dense` (an entry is applied only
// inside the tile its index falls in). `bad_entries` (device, may be null)
// receives how many entries break the precondition (index >= n, or not
// above the worker's previous index): 0 for valid payloads, which get the
// CPU's bits. When it is not 0, dense is unspecified (but within bounds).
// Counting reads every index once more (4 bytes per entry, mostly from
// L2); pass null to skip it when the payloads were validated on the host.
absl::Status SparseSumToDense(absl::Span<const SparsePayload> payloads, float* dense, uint64_t n,
                              const SparseSumOptions& options, uint64_t* bad_entries,
                              Stream stream);

}  // namespace cuda
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CUDA_SPARSE_SUM_H_
