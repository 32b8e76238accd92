// Whether a kernel writes its output with ordinary or streaming stores.
//
// An ordinary store into a line the cache does not hold first reads the
// line from memory (a read for ownership), then writes it back when it is
// evicted: a cold output costs twice its bytes. A streaming (non-
// temporal) store of a whole 64-byte line skips the read and leaves the
// line out of the caches. That pays only when the output could not stay
// cached anyway, so that by the time the next reader (the optimizer, the
// next bucket) comes, its first lines are gone: when it is larger than
// the calling core's part of the last-level cache, which the other cores
// sharing that cache fill at the same time: three quarters of the
// cache's size over the CPUs that share it, the threshold glibc's x86
// memcpy took for its non-temporal stores in 2020 (commit d3c5702).
// Smaller outputs keep ordinary stores, so that the next reader finds
// them in cache.
#ifndef GRADWIRE_KERNELS_CPU_STREAMING_STORE_H_
#define GRADWIRE_KERNELS_CPU_STREAMING_STORE_H_

#include <stdint.h>

#include <string>

namespace gradwire {
namespace kernels {
namespace cpu {

enum class OutStores {
  kCached,     // ordinary stores
  kStreaming,  // whole lines by streaming stores; StreamingFence() after
};

// The size of the last-level cache that the calling core shares: sysfs's
// cache/index*/size of cpu0's highest level (one instance, as a core sees
// it; glibc's sysconf reports the whole socket's L3 on some VMs, ten
// times that), else sysconf's L3, else 32 MiB. Asked once.
uint64_t LastLevelCacheBytes();

// How many CPUs share that cache: sysfs's shared_cpu_list of the same
// cache of cpu0, else 1. Asked once.
uint64_t LastLevelCacheSharers();

// The number of CPUs in a sysfs CPU list ("0-1", "0-7,64-71", "3", with
// or without a trailing newline); 0 if the text is not one.
uint64_t CountCpuList(const std::string& text);

// Whether this process runs under a hypervisor (x86's CPUID leaf 1, ECX
// bit 31; false elsewhere). Asked once.
bool UnderHypervisor();

// The most of a last-level cache one CPU can count on under a hypervisor:
// 4 MiB, a physical core's slice of L3 on today's x86 server parts
// without stacked cache (an AMD Zen 4 or 5 CCD: 32 MiB for 8 cores; Intel
// Granite Rapids: 504 MB for 128). A guest sees the host's whole cache
// but only its own vCPUs as the CPUs sharing it: a 2-vCPU VM on an Intel
// host was told 480 MiB shared by 2, which put the threshold at 180 MiB,
// and a cold 102 MB average then took twice as long with ordinary stores
// as with streaming ones (docs/results/2026-12-02-vm-cache-share.md).
inline constexpr uint64_t kVirtualCpuCacheShareBytes = uint64_t{4} << 20;

// Three quarters of one CPU's share of a last-level cache of `bytes`
// shared by `sharers` CPUs (bytes / sharers, at most
// kVirtualCpuCacheShareBytes when `virtualized`), at least 1 MiB.
uint64_t StreamingThresholdFor(uint64_t bytes, uint64_t sharers, bool virtualized);

// StreamingThresholdFor(LastLevelCacheBytes(), LastLevelCacheSharers(),
// UnderHypervisor()): the output size past which StoresFor streams.
uint64_t StreamingThresholdBytes();

// kStreaming for an output of more than StreamingThresholdBytes(), else
// kCached.
OutStores StoresFor(uint64_t output_bytes);

// out[0, n) = +0. With kStreaming its whole 64-byte lines are written by
// streaming stores (and fenced before it returns), never read first:
// glibc's memset streams only past a threshold it sizes from the L3 that
// CPUID reports, which a guest is told is the host's whole cache (480 MiB
// on an Intel guest, where a sparse average zeroing 102 MB by memset took
// 12.5 ms and by ZeroFloats 7.0: docs/results/2026-12-05-range-average.md).
void ZeroFloats(float* out, uint64_t n, OutStores stores);

// Orders a kernel's streaming stores before whatever the caller does next
// (sfence); every kernel that streamed calls it before it returns.
void StreamingFence();

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_STREAMING_STORE_H_
