// base/huge_pages.h: large allocations start on a huge-page boundary, are
// advised MADV_HUGEPAGE (the mapping's "hg" flag in /proc/self/smaps), are
// zeroed and writable to their last byte; small ones are ordinary.
#include "gradwire/base/huge_pages.h"

#include <stdint.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

// The VmFlags line of the mapping in /proc/self/smaps that holds `p`; empty
// when none is found.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Whether this kernel has transparent huge pages at all (else madvise
// refuses the advice and the mapping carries no flag).
bool KernelHasThp() { return access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0; }

TEST(HugePagesTest, LargeVectorsAreAlignedAdvisedZeroedAndWritable) {
  if (!kHugePagesMapped) {
    std::cout << "SKIPPED the mapping checks: under AddressSanitizer the memory is ordinary\n";
  }
  for (size_t n : {kHugePageBytes / 4, kHugePageBytes / 4 + 1, size_t{25557032}}) {
    SCOPED_TRACE(n);
    HugePageVector<float> v(n);
    ASSERT_EQ(v.size(), n);
    for (size_t i = 0; i < n; i += 4096) ASSERT_EQ(v[i], 0.0f) << i;
    EXPECT_EQ(v.back(), 0.0f);
    v.front() = 1.0f;
    v.back() = 2.0f;
    EXPECT_EQ(v.front() + v.back(), 3.0f);
    if (!kHugePagesMapped) continue;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
    if (KernelHasThp()) {
      EXPECT_NE(VmFlagsOf(v.data()).find(" hg"), std::string::npos) << VmFlagsOf(v.data());
    } else {
      std::cout << "SKIPPED the MADV_HUGEPAGE check: this kernel has no transparent huge pages\n";
    }
  }
}

TEST(HugePagesTest, SmallVectorsAreOrdinary) {
  HugePageVector<float> v(kHugePageBytes / 4 - 1, 5.0f);
  EXPECT_EQ(v.back(), 5.0f);
  // Not advised: the heap's mapping (or a mapping of glibc's own).
  EXPECT_EQ(VmFlagsOf(v.data()).find(" hg"), std::string::npos) << VmFlagsOf(v.data());
}

// Growth moves the elements between the two kinds of memory and frees the
// old (ASan's leak check and munmap of the right length say so).
TEST(HugePagesTest, GrowingAndShrinkingKeepsTheElements) {
  HugePageVector<uint32_t> v;
  for (uint32_t i = 0; i < (3u << 20); ++i) v.push_back(i);
  for (uint32_t i = 0; i < v.size(); i += 997) ASSERT_EQ(v[i], i);
  if (kHugePagesMapped) EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  v.resize(1000);
  v.shrink_to_fit();
  EXPECT_EQ(v[999], 999u);
  HugePageVector<uint32_t> copy = v;
  copy.resize(kHugePageBytes);
  EXPECT_EQ(copy[999], 999u);
  EXPECT_EQ(copy.back(), 0u);
}

TEST(HugePagesTest, ImpossibleSizesThrowBadAlloc) {
  HugePageAllocator<float> a;
  EXPECT_THROW(a.allocate(SIZE_MAX / 2), std::bad_alloc);
  // Under AddressSanitizer the rest go to its allocator, which stops the
  // process on sizes it cannot serve rather than throw.
  if (!kHugePagesMapped) return;
  EXPECT_THROW(a.allocate(SIZE_MAX / 4 - 10), std::bad_alloc);
  EXPECT_THROW(a.allocate(size_t{1} << 44), std::bad_alloc);  // 64 TiB: no mapping
}

}  // namespace
}  // namespace gradwire
