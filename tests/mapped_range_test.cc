// CheckReadWritableRange (lib/python/mapped_range.h), by the ioctl and by
// parsing /proc/self/maps alike: heap, stack and anonymous mappings pass;
// unmapped pages, a read-only or PROT_NONE page anywhere in the range, a
// range running off the end of its mapping into a hole and one wrapping
// past the end of the address space are refused, naming the first bad
// byte; ranges spanning adjacent mappings of different origins pass.
#include "gradwire/lib/python/mapped_range.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace python {
namespace {

using ::testing::HasSubstr;

using CheckFn = absl::Status (*)(uintptr_t, uint64_t);

class MappedRangeTest : public ::testing::TestWithParam<CheckFn> {};

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST_P(MappedRangeTest, OrdinaryMemoryPasses) {
  CheckFn check = GetParam();
  std::vector<float> heap(1 << 20);
  EXPECT_TRUE(check(Addr(heap.data()), heap.size() * sizeof(float)).ok());
  float stack[64];
  EXPECT_TRUE(check(Addr(stack), sizeof(stack)).ok());
  EXPECT_TRUE(check(0, 0).ok());  // nothing to touch
  EXPECT_TRUE(check(12345, 0).ok());
}

TEST_P(MappedRangeTest, UnmappedReadOnlyAndNoneAreRefused) {
  CheckFn check = GetParam();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Four pages: rw, rw, r-, rw; then the fourth unmapped.
  uint8_t* base = static_cast<uint8_t*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  EXPECT_TRUE(check(Addr(base), 4 * page).ok());
  // Page 1 in a mapping of its own (other flags, still rw): a range across
  // three adjacent mappings passes.
  ASSERT_EQ(madvise(base + page, page, MADV_DONTFORK), 0);
  EXPECT_TRUE(check(Addr(base + 8), 3 * page - 16).ok());
  ASSERT_EQ(mprotect(base + 2 * page, page, PROT_READ), 0);
  EXPECT_TRUE(check(Addr(base), 2 * page).ok());
  absl::Status s = check(Addr(base + 4), 3 * page);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("byte " + std::to_string(2 * page - 4) + " of the"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("read-only"));
  ASSERT_EQ(mprotect(base + 2 * page, page, PROT_NONE), 0);  // as CUDA's reservations
  s = check(Addr(base + 2 * page), 4);
  EXPECT_THAT(std::string(s.message()), HasSubstr("neither readable nor writable"));
  ASSERT_EQ(mprotect(base + 2 * page, page, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(munmap(base + 3 * page, page), 0);
  EXPECT_TRUE(check(Addr(base), 3 * page).ok());
  s = check(Addr(base), 3 * page + 4);  // one float past the end
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not mapped in this process"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("byte " + std::to_string(3 * page)));
  ASSERT_EQ(munmap(base, 3 * page), 0);
  s = check(Addr(base), 4);  // all gone
  EXPECT_THAT(std::string(s.message()), HasSubstr("byte 0 of the 4"));
  // Small integers a caller may pass by mistake: page 0 is never mapped.
  EXPECT_EQ(check(4096, 4000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(check(16, 4).code(), absl::StatusCode::kInvalidArgument);
  s = check(UINTPTR_MAX - 3, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("past the end of the address space"));
}

INSTANTIATE_TEST_SUITE_P(IoctlAndParsing, MappedRangeTest,
                         ::testing::Values(&CheckReadWritableRange,
                                           &CheckReadWritableRangeByParsing));

}  // namespace
}  // namespace python
}  // namespace gradwire
