// The receive side's sparse average for frames whose indices are
// delta-varint coded (docs/wire_format.md, "Indices"), decoded as they are
// added: no list of indices is stored and read back.
#ifndef GRADWIRE_KERNELS_CPU_VARINT_AVERAGE_H_
#define GRADWIRE_KERNELS_CPU_VARINT_AVERAGE_H_

#include <cstdint>

#include "absl/types/span.h"
#include "gradwire/kernels/cpu/streaming_store.h"
#include "gradwire/kernels/types.h"

namespace gradwire {
namespace kernels {
namespace cpu {

// SparseAverage(payloads with their indices decoded, divisor, dense,
// stores), bit for bit (sparse_sum.h), the indices decoded as the adds
// use them. Like SparseAverage it checks nothing: the caller has checked
// every index section (exactly `count` varints in `index_byte_count`
// bytes, each index < dense.size(), strictly increasing) and the formats.
// A bad section still reads no byte outside it and writes only dense: a
// varint cut short, longer than five bytes, or an index at or past
// dense.size() ends its payload there (the entries before it are added).
//
// Dense is walked once in slices that stay in L1 (a small buffer sums
// each slice and leaves it divided, as SparseAverage's dense chunks do):
// each payload's cursor adds its entries below the slice's end (eight at
// a time where their gaps are one byte each), then the slice is stored.
//
// Why not decode the indices into lists and SparseAverage them: the lists
// are written and read back (p * k u32s; a list per range, as this
// replaced, still costs a store, a load and a scan for the range's end per
// entry). On a Zen 3 guest, four top-k 10 % frames of 1M elements averaged
// in 1.04-1.19 ms this way against 1.33-1.55 ms range by range (four
// alternated rounds, caches cold; docs/results/2026-12-06-varint-average.md).
// Sparser frames (1 % and below) still go through whole lists where those
// are small (lib's sparse codec chooses): there each of this walk's
// slices costs more than the lists' sparse chunks.
void DeltaVarintAverage(absl::Span<const DeltaVarintPayload> payloads, float divisor,
                        absl::Span<float> dense, OutStores stores);

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_VARINT_AVERAGE_H_
