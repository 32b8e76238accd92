// A deterministic gradient-like vector for tests that compare two paths on
// the same input (device vs host, one exchanger vs another): values in
// [-0.5, 0.5) scaled by 1..7 so that magnitudes differ, a different vector
// per salt.
#ifndef GRADWIRE_TESTS_SYNTHETIC_GRADIENT_H_
#define GRADWIRE_TESTS_SYNTHETIC_GRADIENT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradwire {
namespace testing {

inline std::vector<float> SyntheticGradient(size_t n, int salt) {
  std::vector<float> g(n);
  uint32_t x = 12345u + 977u * static_cast<uint32_t>(salt);
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    g[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * static_cast<float>(1 + i % 7);
  }
  return g;
}

}  // namespace testing
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_SYNTHETIC_GRADIENT_H_
