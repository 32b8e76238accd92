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

// Three quarters of LastLevelCacheBytes() / LastLevelCacheSharers(), at
// least 1 MiB: the output size past which StoresFor streams.
uint64_t StreamingThresholdBytes();

// kStreaming for an output of more than StreamingThresholdBytes(), else
// kCached.
OutStores StoresFor(uint64_t output_bytes);

// Orders a kernel's streaming stores before whatever the caller does next
// (sfence); every kernel that streamed calls it before it returns.
void StreamingFence();

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_STREAMING_STORE_H_
