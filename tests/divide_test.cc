// DivideAll and DivideAllInto (divide_x86.h), the receive side's
// division, against x / d element by element, bit for bit, by ordinary and
// streaming stores (streaming_store.h). Built three times, as
// cpu_clones_test (tests/BUILD.bazel), so every clone's loop is checked.
#include <gtest/gtest.h>

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

TEST(DivideTest, StreamingOnlyPastTheLastLevelCache) {
  const uint64_t llc = LastLevelCacheBytes();
  EXPECT_GE(llc, uint64_t{64} << 10) << "no last-level cache this small";
  EXPECT_EQ(StoresFor(0), OutStores::kCached);
  EXPECT_EQ(StoresFor(llc), OutStores::kCached);
  EXPECT_EQ(StoresFor(llc + 1), OutStores::kStreaming);
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
