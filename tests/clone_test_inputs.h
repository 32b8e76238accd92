// Inputs, bit comparisons and guarded buffers shared by the tests that
// run once per build of the CPU kernels (tests/BUILD.bazel:
// cpu_clones_test, divide_test, randomk_test; GuardedBytes also by
// tests/fuzz/codec_fuzzer.cc): gradient-like values with every special
// float class, bit patterns compared with every NaN as one, and buffers
// that end at a page the process may not touch.
#ifndef GRADWIRE_TESTS_CLONE_TEST_INPUTS_H_
#define GRADWIRE_TESTS_CLONE_TEST_INPUTS_H_

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {

inline float Bits(uint32_t u) { return BitsFloat(u); }

// Gradient-like values with every special class mixed in: NaNs (quiet,
// signalling, with payloads), ±Inf, ±0, float and half denormals, values
// at the fp16 and bf16 rounding and overflow edges, and tiny values next
// to large ones (the sign scale's in-order double sum).
inline std::vector<float> Mixed(uint64_t n, std::mt19937_64& rng) {
  static const float kSpecial[] = {std::numeric_limits<float>::quiet_NaN(),
                                   -std::numeric_limits<float>::quiet_NaN(),
                                   Bits(0x7f800001u),
                                   Bits(0xffa00000u),
                                   Bits(0x7fc12345u),  // signalling, payloads
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(),
                                   0.0f,
                                   -0.0f,
                                   Bits(1u),
                                   Bits(0x807fffffu),
                                   Bits(0x00400000u),  // float denormals
                                   5.9604645e-8f,
                                   -2.9802322e-8f,
                                   6.1035156e-5f,
                                   6.097555e-5f,  // half denormal edges
                                   65504.0f,
                                   65519.996f,
                                   65520.0f,
                                   -65520.0f,
                                   1e6f,
                                   -3.4028235e38f,
                                   Bits(0x7f7f8000u),
                                   Bits(0x7f7f7fffu),
                                   Bits(0xff7fffffu),  // bf16 overflow edges
                                   1.0000001f,
                                   1.00048828125f,
                                   0.33333334f,
                                   1e-30f,
                                   -1e-38f};
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exp(-40, 20);
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    switch (rng() % 16) {
      case 0:
        v[i] = kSpecial[rng() % (sizeof kSpecial / sizeof kSpecial[0])];
        break;
      case 1:
        v[i] = Bits(static_cast<uint32_t>(rng()));  // any bit pattern
        break;
      case 2:
        v[i] = std::ldexp(normal(rng), exp(rng));  // spread exponents
        break;
      default:
        v[i] = normal(rng);
    }
  }
  return v;
}

// Finite values only, some buckets with a few far smaller ones: the sign
// scale's fast sum (exact) and its in-order fallback both run.
inline std::vector<float> Finite(uint64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) {
    x = normal(rng);
    if (rng() % 200 == 0) x = std::ldexp(x, -static_cast<int>(rng() % 60));
    if (rng() % 1000 == 0) x = Bits(static_cast<uint32_t>(rng() % 0x00800000u));  // denormal
  }
  return v;
}

inline std::vector<float> Input(bool mixed, uint64_t n, std::mt19937_64& rng) {
  return mixed ? Mixed(n, rng) : Finite(n, rng);
}

// Bit patterns, every NaN as one: a NaN's payload is not part of the
// contract (x86 returns the first operand's, and the compiler may swap
// the operands of an addition; CUDA returns a canonical NaN).
inline std::vector<uint32_t> AsBits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = IsNan(v[i]) ? 0x7fc00000u : FloatBits(v[i]);
  return b;
}

inline std::vector<uint32_t> ValueBits(const std::vector<uint8_t>& bytes, ValueFormat f) {
  std::vector<float> v(bytes.size() / ValueWidth(f));
  for (size_t i = 0; i < v.size(); ++i) v[i] = LoadValue(bytes.data(), i, f);
  return AsBits(v);
}

#define EXPECT_SAME_FLOATS(a, b) EXPECT_EQ(AsBits(a), AsBits(b))

// `bytes` bytes that end flush against a page the process may not touch,
// so that a load or store past their end faults. ASan builds run no
// clones (clones_x86.h): this is how the clones' vector loads and stores
// are seen to stay inside what they are given.
class GuardedBytes {
 public:
  explicit GuardedBytes(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span_ = (bytes + page - 1) / page * page + page;
    void* base = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) std::abort();
    base_ = static_cast<uint8_t*>(base);
    if (mprotect(base_ + span_ - page, page, PROT_NONE) != 0) std::abort();
    data_ = base_ + span_ - page - bytes;
  }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  ~GuardedBytes() { munmap(base_, span_); }
  uint8_t* data() { return data_; }
  float* floats() { return reinterpret_cast<float*>(data_); }

 private:
  uint8_t* base_;
  size_t span_;
  uint8_t* data_;
};

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_CLONE_TEST_INPUTS_H_
