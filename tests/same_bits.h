// Bit-for-bit equality of float buffers, for tests of the kernels' and
// codecs' exact contracts: NaN payloads and the sign of zero count, as
// the contracts promise them.
#ifndef GRADWIRE_TESTS_SAME_BITS_H_
#define GRADWIRE_TESTS_SAME_BITS_H_

#include <cstring>
#include <vector>

namespace gradwire {
namespace testing {

// Whether a and b hold the same number of floats with the same bits.
// Empty buffers are equal without a memcmp (whose pointer arguments must
// not be null, while an empty vector's data() may be).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace testing
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_SAME_BITS_H_
