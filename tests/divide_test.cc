// DivideAll and DivideAllInto (divide_x86.h), the receive side's
// division, against x / d element by element, bit for bit, by ordinary and
// streaming stores (streaming_store.h). Built three times, as
// cpu_clones_test (tests/BUILD.bazel), so every clone's loop is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/cpu/streaming_store.h"
#include "tests/clone_test_inputs.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

TEST(DivideTest, DivideAllDividesEachElement) {
  GRADWIRE_SEEDED_RNG(rng);
  // Powers of two (a multiply, when the reciprocal is exact), others (a
  // division), and the edges where 1/d leaves the float range.
  for (float d : {1.0f, 2.0f, 4.0f, 0.25f, -8.0f, 3.0f, 0.7f, 1e-3f, std::ldexp(1.0f, 126),
                  std::ldexp(1.0f, 127), std::ldexp(1.0f, -126), std::ldexp(1.0f, -127),
                  std::ldexp(1.0f, -128), std::ldexp(1.0f, -149), 3.4028235e38f}) {
    for (uint64_t n : {0ull, 1ull, 15ull, 16ull, 47ull, 1000ull}) {
      const std::vector<float> x = Mixed(n, rng);
      std::vector<float> want = x, got = x;
      for (float& v : want) v = v / d;
      DivideAll(got.data(), n, d);
      EXPECT_SAME_FLOATS(want, got) << "divisor " << d;
      // DivideAllInto: the same quotients in `to`, and `from` left +0, by
      // either store, `to` at any float offset from a cache line.
      for (OutStores stores : {OutStores::kCached, OutStores::kStreaming}) {
        const uint64_t offset = rng() % 16;
        std::vector<float> from = x, to(n + 16, 7.0f);
        DivideAllInto(from.data(), to.data() + offset, n, d, stores);
        StreamingFence();
        const bool streaming = stores == OutStores::kStreaming;
        EXPECT_SAME_FLOATS(want, std::vector<float>(to.begin() + offset, to.begin() + offset + n))
            << "divisor " << d << " streaming " << streaming << " offset " << offset;
        EXPECT_SAME_FLOATS(std::vector<float>(n, 0.0f), from) << "divisor " << d;
        for (uint64_t i = 0; i < to.size(); ++i) {
          if (i < offset || i >= offset + n) {
            ASSERT_EQ(to[i], 7.0f) << i;
          }
        }
      }
    }
  }
}

TEST(DivideTest, StreamingOnlyPastTheCoresShareOfTheLastLevelCache) {
  const uint64_t llc = LastLevelCacheBytes();
  EXPECT_GE(llc, uint64_t{64} << 10) << "no last-level cache this small";
  const uint64_t sharers = LastLevelCacheSharers();
  EXPECT_GE(sharers, 1u);
  const uint64_t threshold = StreamingThresholdBytes();
  // The rule itself is pinned below (StreamingThresholdCapsAVirtualCpusShare).
  EXPECT_EQ(threshold, StreamingThresholdFor(llc, sharers, UnderHypervisor()));
  EXPECT_EQ(StoresFor(0), OutStores::kCached);
  EXPECT_EQ(StoresFor(threshold), OutStores::kCached);
  EXPECT_EQ(StoresFor(threshold + 1), OutStores::kStreaming);
  // Never past the whole cache, where the floor allows.
  if (llc >= (uint64_t{4} << 20) / 3) {
    EXPECT_LE(threshold, llc);
  }
}

// Bare metal: the cache over its sharers. A VM, told the host's cache
// and only its own vCPUs: at most a core's slice each.
TEST(DivideTest, StreamingThresholdCapsAVirtualCpusShare) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(StreamingThresholdFor(32 * kMiB, 2, false), 12 * kMiB);
  EXPECT_EQ(StreamingThresholdFor(32 * kMiB, 8, false), 3 * kMiB);
  EXPECT_EQ(StreamingThresholdFor(480 * kMiB, 2, false), 180 * kMiB);
  EXPECT_EQ(StreamingThresholdFor(480 * kMiB, 2, true), 3 * kMiB);
  EXPECT_EQ(StreamingThresholdFor(32 * kMiB, 2, true), 3 * kMiB);
  // A share under the cap stays as it is; the 1 MiB floor holds either way.
  EXPECT_EQ(StreamingThresholdFor(8 * kMiB, 4, true), 1536 * 1024u);
  EXPECT_EQ(StreamingThresholdFor(2 * kMiB, 4, true), kMiB);
  EXPECT_EQ(StreamingThresholdFor(2 * kMiB, 0, false), 1536 * 1024u);  // 0 sharers: one
}

TEST(DivideTest, CountsSysfsCpuLists) {
  EXPECT_EQ(CountCpuList("0-1\n"), 2u);
  EXPECT_EQ(CountCpuList("3"), 1u);
  EXPECT_EQ(CountCpuList("0-7,64-71\n"), 16u);
  EXPECT_EQ(CountCpuList("0,2,4-5"), 4u);
  // Not a list: 0, so that the caller falls back to one sharer.
  for (const char* bad : {"", "\n", "-1", "1-", "4-2", "1,", ",1", "1,,2", "a", "1 2", "0-7x",
                          "1234567890", "0-1234567890"}) {
    EXPECT_EQ(CountCpuList(bad), 0u) << '"' << bad << '"';
  }
}

// ZeroFloats writes +0 to exactly out[0, n) with either store, at any
// offset from a cache line and any length (whole lines, heads, tails).
TEST(DivideTest, ZeroFloatsZeroesExactlyItsRange) {
  for (OutStores stores : {OutStores::kCached, OutStores::kStreaming}) {
    for (uint64_t offset : {0, 1, 5, 15, 16}) {
      for (uint64_t n : {0, 1, 3, 15, 16, 17, 31, 32, 100, 1000, 4099}) {
        std::vector<float> v(n + 40, -1.0f);
        ZeroFloats(v.data() + offset, n, stores);
        for (uint64_t i = 0; i < v.size(); ++i) {
          const bool inside = i >= offset && i < offset + n;
          ASSERT_EQ(std::signbit(v[i]), !inside) << i << " n " << n << " offset " << offset;
          ASSERT_EQ(v[i], inside ? 0.0f : -1.0f) << i << " n " << n << " offset " << offset;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
