// The element hash's vector runs (element_hash_x86.h: HashRun,
// RoundingHashRun, and the inverse eight lanes at a time) against
// ElementHash, RoundingHash and ElementHashInverse element by element. Built three times, as
// cpu_clones_test (tests/BUILD.bazel), so every clone's loop is checked.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

TEST(ElementHashTest, HashRunsMatchElementHash) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<uint32_t> out(1000);
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t bits = trial % 2 == 0 ? 32 : kMinHashBits + rng() % (33 - kMinHashBits);
    const ElementKey key = MakeElementKey(rng(), bits);
    const uint64_t first = rng() % (uint64_t{1} << 32), count = rng() % 1000;
    for (bool full : {false, true}) {
      if (full && bits != 32) continue;
      if (full) {
        HashRun<true>(key, first, count, out.data());
      } else {
        HashRun<false>(key, first, count, out.data());
      }
      for (uint64_t j = 0; j < count; ++j) {
        ASSERT_EQ(out[j], ElementHash(key, first + j))
            << "bits " << bits << " full " << full << " index " << first + j;
      }
    }
  }
}

// QSGD's one-round rounding hash (RoundingHashRun), including first
// indices past 2^32 (the index's low 32 bits are hashed).
TEST(ElementHashTest, RoundingHashRunsMatchRoundingHash) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<uint32_t> out(1000);
  for (int trial = 0; trial < 400; ++trial) {
    const ElementKey key = RoundingKey(rng(), rng() % 1000);
    const uint64_t first = rng() % (uint64_t{1} << 33), count = rng() % 1000;
    RoundingHashRun(key, first, count, out.data());
    for (uint64_t j = 0; j < count; ++j) {
      ASSERT_EQ(out[j], RoundingHash(key, first + j)) << "index " << first + j;
    }
  }
}

TEST(ElementHashTest, VectorInverseMatchesElementHashInverse) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bits = kMinHashBits; bits <= 32; ++bits) {
    const ElementKey key = MakeElementKey(rng(), bits);
    for (int trial = 0; trial < 100; ++trial) {
      HashU32x8 v;
      for (int l = 0; l < 8; ++l) v[l] = static_cast<uint32_t>(rng()) & key.mask;
      const HashU32x8 h = v;
      if (bits == 32) {
        ElementHashInverse8<true>(key, &v);
      } else {
        ElementHashInverse8<false>(key, &v);
      }
      for (int l = 0; l < 8; ++l) {
        ASSERT_EQ(v[l], ElementHashInverse(key, h[l])) << "bits " << bits;
        ASSERT_EQ(ElementHash(key, v[l]), h[l]) << "bits " << bits;
      }
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
