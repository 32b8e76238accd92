// CPU reference for summing P workers' sparse payloads into one dense
// buffer (the receive side of a sparse allgather), with optional averaging.
// The CUDA version (kernels/cuda/sparse_sum.h) gives the same bits.
#ifndef GRADWIRE_KERNELS_CPU_SPARSE_SUM_H_
#define GRADWIRE_KERNELS_CPU_SPARSE_SUM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/kernels/cpu/streaming_store.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// dense[i] = (start[i] + v_0[i] + v_1[i] + ... + v_{P-1}[i]) * scale, added
// left to right in worker order (absent entries add nothing; the scale is
// applied to every element, touched or not). InvalidArgument (dense
// untouched) for null pointers with count > 0, count > n, an index >= n or
// indices not strictly increasing.
absl::Status SparseSumToDense(absl::Span<const SparsePayload> payloads, absl::Span<float> dense,
                              const SparseSumOptions& options);

// The receive side of a sparse allgather, as lib's DecodeAverage needs it
// (bit for bit what the codec contract promises), into all of `dense`:
//   dense[i] = (((0 + v_0[i]) + v_1[i]) + ... + v_{P-1}[i]) / divisor
// for every i some payload holds (added in payload order, absent entries
// adding nothing, divided once; divisor 1 divides nothing), and 0 for every
// other i: what zeroing dense, SparseDecodeAccumulate of each payload in
// order and one division of each touched element give. Unlike
// SparseSumToDense (which multiplies every element by a scale, as the CUDA
// kernel does) it divides, and it checks nothing: the caller has validated
// the payloads (indices strictly increasing and < dense.size(), known
// formats). Several payloads may share one index list (random-k).
//
// Why not that sequence: its scattered adds and divisions each miss the
// cache (dense is the whole gradient, payloads cover a few % of it). Here
// dense is walked once in chunks that fit in L1. A chunk with few entries
// is zeroed, gets its share of every payload and has its touched elements
// divided while still in cache. A denser one (an eighth of its elements or
// more) sums into a buffer that stays in L1 and is divided on its way out
// (DivideAllInto: by a multiply when 1 / divisor is exact, e.g. P = 4):
// dense's lines are stored once, in order, never zeroed first or read
// back.
// When every payload holds the same index list (the same pointer or equal
// contents, as random-k frames of one step do), each entry's sum is
// formed in order and stored once into that buffer instead.
// A dense larger than this core's part of the last-level cache takes
// those chunk stores as streaming ones (StoresFor, streaming_store.h):
// ResNet-50's 102 MB average of four frames at 10 % went from 23-24 to
// 19-20 ms on a Zen 5 core, as its lines are no longer read before they
// are written. Then the sparse chunks (and the empty ones: top-k's
// selections crowd into a few layers) take the buffer too, rather than be
// zeroed in place, which would read their lines first; only payloads
// under one entry in 32 elements still have all of dense zeroed first
// (ZeroFloats, by streaming stores too). And a dense chunk is summed and
// stored in quarters, so that the frames' reads and dense's streaming
// stores alternate in
// shorter bursts (about a tenth off that average).
void SparseAverage(absl::Span<const SparsePayload> payloads, float divisor,
                   absl::Span<float> dense);

// The same with the caller's choice of stores; the bits do not depend on
// it (tests run both).
void SparseAverage(absl::Span<const SparsePayload> payloads, float divisor, absl::Span<float> dense,
                   OutStores stores);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_SPARSE_SUM_H_
