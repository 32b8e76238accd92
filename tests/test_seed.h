// Fresh randomness for every test run, with the seed reported on failure:
// tests see new data each time, and any failure can be replayed by setting
// GRADWIRE_TEST_SEED.
#ifndef GRADWIRE_TESTS_TEST_SEED_H_
#define GRADWIRE_TESTS_TEST_SEED_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace gradwire {
namespace testing {

inline uint64_t FreshSeed() {
  if (const char* s = std::getenv("GRADWIRE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

inline std::string SeedMessage(uint64_t seed) {
  return "random seed " + std::to_string(seed) +
         " (replay: GRADWIRE_TEST_SEED=" + std::to_string(seed) + ")";
}

}  // namespace testing
}  // namespace gradwire

// Declares `rng` seeded freshly and traces the seed in every failure below.
#define GRADWIRE_SEEDED_RNG(rng)                                \
  const uint64_t rng##_seed = ::gradwire::testing::FreshSeed(); \
  SCOPED_TRACE(::gradwire::testing::SeedMessage(rng##_seed));   \
  std::mt19937_64 rng(rng##_seed)

#endif  // GRADWIRE_TESTS_TEST_SEED_H_
