// HugePageAllocator: memory for the large buffers a training step streams
// through every step (a bucket's fused gradients, error-feedback
// residuals), backed by transparent huge pages where the kernel offers them.
//
// An allocation of at least kHugePageBytes is mapped on its own, starts on
// a 2 MiB boundary and is marked MADV_HUGEPAGE, so that where transparent
// huge pages are enabled "madvise" (the default of Debian and Ubuntu) as
// well as "always", its memory is 2 MiB pages: one TLB entry where 512
// were. On a 2-vCPU AMD EPYC guest one rank's top-k 1 % step over
// ResNet-50's gradient took 23.8 ms of CPU with the bucket data and the
// residuals on 4 KiB pages and 19.0 ms on huge pages (medians of five
// interleaved pairs; docs/results/2026-12-07-huge-pages.md). The advice is a hint:
// where the kernel declines it (THP "never", no madvise), the memory is
// ordinary and only the speed differs. Smaller allocations come from
// ::operator new as std::allocator's do.
//
// For buffers made once and kept: every large allocation is a fresh
// mapping whose pages fault in anew, where malloc would hand back memory
// just freed.
//
//   HugePageVector<float> residual(n);  // a std::vector, zeroed as any
//
// Allocation failure throws std::bad_alloc, as std::allocator's does.
#ifndef GRADWIRE_BASE_HUGE_PAGES_H_
#define GRADWIRE_BASE_HUGE_PAGES_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include <new>
#include <vector>

namespace gradwire {

// The size of a transparent huge page on x86-64 and the smallest
// allocation HugePageAllocator maps on its own.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Whether HugePageAllocator maps large allocations on its own. Not under
// AddressSanitizer: a mapping of our own is invisible to it, and its
// checks of these buffers matter more there than their speed.
#if defined(__SANITIZE_ADDRESS__)  // GCC
#define GRADWIRE_HUGE_PAGES_UNDER_ASAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define GRADWIRE_HUGE_PAGES_UNDER_ASAN 1
#endif
#endif
#ifdef GRADWIRE_HUGE_PAGES_UNDER_ASAN
inline constexpr bool kHugePagesMapped = false;
#else
inline constexpr bool kHugePagesMapped = true;
#endif

namespace huge_pages_internal {

// The length of Map's mapping: `bytes` rounded up to whole 4 KiB pages.
inline size_t MappedBytes(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// `bytes` (>= kHugePageBytes) of zeroed memory starting on a
// kHugePageBytes boundary, advised MADV_HUGEPAGE; null when no mapping
// could be made. Unmap gives it back.
inline void* Map(size_t bytes) {
  const size_t mapped = MappedBytes(bytes);
  if (mapped < bytes || mapped > SIZE_MAX - kHugePageBytes) return nullptr;
  // Map a huge page more than asked, then cut the mapping to the aligned
  // part: the kernel places mappings on 4 KiB boundaries only.
  const size_t over = mapped + kHugePageBytes;
  void* raw = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + mapped;
  if (start + over > end) munmap(reinterpret_cast<void*>(end), start + over - end);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, mapped, MADV_HUGEPAGE);  // a hint: refused, the pages stay small
#endif
  return p;
}

inline void Unmap(void* p, size_t bytes) { munmap(p, MappedBytes(bytes)); }

}  // namespace huge_pages_internal

template <typename T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: conversions as std::allocator's

  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    if (!Mapped(n)) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = huge_pages_internal::Map(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }

  // `n` is allocate's, as the allocator requirements guarantee: it tells
  // which of the two kinds of memory `p` is.
  void deallocate(T* p, size_t n) noexcept {
    if (Mapped(n)) {
      huge_pages_internal::Unmap(p, n * sizeof(T));
    } else {
      ::operator delete(p);
    }
  }

  // Whether n elements (n * sizeof(T) not overflowing) get a mapping of
  // their own rather than ::operator new's memory.
  static bool Mapped(size_t n) { return kHugePagesMapped && n * sizeof(T) >= kHugePageBytes; }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

// A std::vector whose storage, from kHugePageBytes on, is HugePageAllocator's.
template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace gradwire

#endif  // GRADWIRE_BASE_HUGE_PAGES_H_
