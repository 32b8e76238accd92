// Internal to kernels/cpu: software prefetch for the loops that stream
// large arrays once (top-k's fused pass, the casts', random-k's), and for
// loops of scattered loads (top-k's key sample, the sparse decode's adds).
//
// The hardware prefetchers follow a stream only so far ahead (and not
// across a 4 KiB page), and a loop that reads two arrays and writes a
// third leaves few of their lines in flight at once. On a 2-vCPU KVM
// guest of an Intel server (2026-12-02), top-k's pass over 25.6M floats
// with caches cold ran about a fifth faster when it also prefetched
// grad and residual 4 KiB ahead: the 0.1 % encode (nearly the pass alone)
// 0.73 -> 0.89-0.95x memcpy, 10 % 0.47-0.50 -> 0.52-0.54x; 1 KiB ahead
// did as well, 8 and 16 KiB less well (docs/results/2026-12-02-prefetch.md).
// On a Zen 4 guest (2026-12-05) 2 KiB ahead beat 1, 4 and 8 KiB for
// top-k's, approximate top-k's and random-k's passes at 25.6M (2-11 %
// faster than 4 KiB in each of three alternated rounds; top-k 10 % no
// faster in a later, busier state of the host; 1M within the noise).
// The casts' passes, which also write their values, ran 1-4 % slower at
// 2 KiB than at 4 in most rounds: they keep 4 KiB
// (docs/results/2026-12-05-zen4-prefetch.md).
#ifndef GRADWIRE_KERNELS_CPU_PREFETCH_H_
#define GRADWIRE_KERNELS_CPU_PREFETCH_H_

#include <stdint.h>

namespace gradwire {
namespace kernels {
namespace cpu {

// How far ahead the sparse codecs' passes prefetch (top-k, approximate
// top-k, random-k: the default below).
inline constexpr uint64_t kPrefetchAheadBytes = 2048;
// How far ahead the casts' passes (fp16, bf16, fp32) prefetch.
inline constexpr uint64_t kCastPrefetchAheadBytes = 4096;

// Asks for the cache line kAhead bytes past `p` (for reading, into every
// level). A prefetch never faults, so the address may lie past the
// array's end; the arithmetic is on integers so that it is defined too.
// Call once per 64-byte line that the loop consumes from each stream.
template <uint64_t kAhead>
__attribute__((always_inline)) inline void PrefetchAhead(const void* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kAhead), 0, 3);
}

// The lines kAhead past element i of grad and, with kHasResidual, of the
// residual: the two streams an encode pass with error feedback reads.
// Call once per sixteen elements.
template <bool kHasResidual, uint64_t kAhead = kPrefetchAheadBytes>
__attribute__((always_inline)) inline void PrefetchAccStreams(const float* grad,
                                                              const float* residual, uint64_t i) {
  PrefetchAhead<kAhead>(grad + i);
  if (kHasResidual) PrefetchAhead<kAhead>(residual + i);
}

// Asks for the cache line holding `p` for reading, into the L2 and the
// levels below it but not the L1 (PREFETCHT1 on x86). For loops of
// scattered loads, each a miss: the core tracks only a few L1 misses at
// once (about two dozen on Zen 4), while prefetches into the L2 queue
// behind them, so asking some dozens of loads ahead keeps many more lines
// in flight. Top-k's key sample (topk_sample.h) on a Zen 4 guest, caches
// cold: 4096 keys of 1M elements 73 -> 33 us, 16384 of 25.6M 447 -> 267 us
// (T0 prefetches, which take L1 slots themselves, gained 0-6 %); the
// top-k encode at 1M 4-8 % faster (docs/results/2026-12-05-sample-prefetch.md).
// Not measured on Intel cores, whose T1 also fills the L2 only.
__attribute__((always_inline)) inline void PrefetchToL2(const void* p) {
  __builtin_prefetch(p, 0, 2);
}

// How many positions ahead a loop of scattered loads asks (PrefetchToL2):
// on a Zen 4 guest with caches cold, 32 to 128 did equally well for top-k's
// key sample (1024 to 16384 keys of 1M to 25.6M elements), 8 and 256 less
// well; the sparse decode's adds take the same distance.
inline constexpr uint64_t kScatterPrefetchAhead = 64;

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_PREFETCH_H_
