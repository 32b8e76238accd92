// Test data and comparisons shared by the GPU-vs-CPU tests.
//
// Every compare is bit for bit except where the kernels' contract says
// otherwise: any NaN equals any NaN (SameValue in gpu_test_util.h).
#ifndef GRADWIRE_TESTS_GPU_TEST_DATA_H_
#define GRADWIRE_TESTS_GPU_TEST_DATA_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gradwire/kernels/element_math.h"
#include "gradwire/kernels/types.h"
#include "tests/gpu_test_util.h"

// In namespace kernels (not testing, like gpu_test_util.h): the GPU tests
// live there and use these without using-declarations.
namespace gradwire {
namespace kernels {

enum class Data { kNormal, kHeavyTail, kTies, kZeros, kNonFinite, kSpecials };
inline const Data kAllData[] = {Data::kNormal, Data::kHeavyTail, Data::kTies,
                                Data::kZeros,  Data::kNonFinite, Data::kSpecials};
inline const ValueFormat kFormats[] = {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16};

inline std::string Name(Data d) {
  const char* names[] = {"normal", "heavy-tail", "ties", "zeros", "nonfinite", "specials"};
  return names[static_cast<int>(d)];
}

// Values that stress 16-bit rounding, of both signs: ±0, fp16 subnormals
// and their boundary, the largest finite fp16 and bf16 and what saturates
// past them (65519.99 rounds down, 65520 saturates), bf16's rounding
// boundary, tiny values, ±Inf, NaN with different payloads.
inline float Special(uint64_t r, float normal) {
  static const float kSpecials[] = {
      0.0f,          5.9604645e-8f, 2.9802322e-8f,
      6.097555e-5f,  6.1035156e-5f, 65504.0f,
      65519.99f,     65520.0f,      1e5f,
      3.3895314e38f, 3.4028235e38f, 1.00390625f,
      1e-30f,        1e-45f,        std::numeric_limits<float>::infinity()};
  constexpr uint64_t kCount = sizeof(kSpecials) / sizeof(kSpecials[0]);
  const uint64_t pick = r % (kCount + 3);
  const float sign = (r >> 32) & 1 ? -1.0f : 1.0f;
  if (pick < kCount) return sign * kSpecials[pick];
  if (pick == kCount) return BitsFloat(0x7fc00000u | static_cast<uint32_t>(r >> 40));
  return normal;  // plenty of ordinary values in between
}

// One element of distribution `kind`.
inline float Draw(Data kind, std::mt19937_64& rng, std::normal_distribution<float>& normal) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (kind == Data::kZeros) return 0.0f;
  if (kind == Data::kTies) return static_cast<float>(static_cast<int>(rng() % 7) - 3) * 0.25f;
  if (kind == Data::kSpecials) return Special(rng(), normal(rng));
  if (kind == Data::kNonFinite) {  // 2 % NaN, 4 % ±Inf, the rest large
    const uint64_t r = rng() % 50;
    return r == 0 ? std::nanf("") : r == 1 ? kInf : r == 2 ? -kInf : normal(rng) * 1e5f;
  }
  const float x = normal(rng);
  return kind == Data::kHeavyTail ? x / (0.05f + std::fabs(normal(rng))) : x;
}

inline std::vector<float> MakeData(Data kind, uint64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = Draw(kind, rng, normal);
  return v;
}

// A residual to go with `grad`: finite values (non-finite residuals cannot
// arise: ResidualAfter resets them).
inline std::vector<float> MakeResidual(Data kind, uint64_t n, std::mt19937_64& rng) {
  return MakeData(kind == Data::kNonFinite || kind == Data::kSpecials ? Data::kNormal : kind, n,
                  rng);
}

// Normal-ish values from a counter hash: fast enough for billions of
// elements (the GRADWIRE_GPU_LARGE sizes), reproducible from the seed.
inline std::vector<float> FastData(uint64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t h = Mix64(seed + (i + 1) * kGolden64);
    // Sum of two uniforms (hash bits 40..63 and 16..39), centred: a
    // triangle distribution on (-1, 1).
    v[i] =
        UnitFloat(static_cast<uint32_t>(h >> 32)) + UnitFloat(static_cast<uint32_t>(h >> 8)) - 1.0f;
  }
  return v;
}

template <typename T>
void ExpectSameBytes(const std::vector<T>& cpu, const std::vector<T>& gpu, const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(std::memcmp(&cpu[i], &gpu[i], sizeof(T)), 0)
        << what << " differs at " << i << " (cpu " << +cpu[i] << ", gpu " << +gpu[i] << ")";
  }
}

// Floats: the same bits, or both NaN.
inline void ExpectSameFloats(const std::vector<float>& cpu, const std::vector<float>& gpu,
                             const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_TRUE(testing::SameValue(cpu[i], gpu[i]))
        << what << " differs at " << i << " (cpu " << cpu[i] << ", gpu " << gpu[i] << ")";
  }
}

// Stored values (`count` of them in `format` at byte `offset`): the same
// decoded value, NaN payloads aside; the bytes around them the same.
inline void ExpectSameValues(const std::vector<uint8_t>& cpu, const std::vector<uint8_t>& gpu,
                             uint64_t offset, uint64_t count, ValueFormat format,
                             const char* what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  const uint64_t end = offset + count * ValueWidth(format);
  for (uint64_t j = 0; j < count; ++j) {
    const float c = LoadValue(cpu.data() + offset, j, format);
    const float g = LoadValue(gpu.data() + offset, j, format);
    ASSERT_TRUE(testing::SameValue(c, g))
        << what << " " << j << " (cpu " << c << ", gpu " << g << ")";
  }
  for (uint64_t b = 0; b < cpu.size(); ++b) {
    if (b < offset || b >= end) {
      ASSERT_EQ(cpu[b], gpu[b]) << what << ": byte " << b << " outside";
    }
  }
}

inline void ExpectSameStats(const FusedStats& cpu, const testing::DeviceArray<FusedStats>& gpu) {
  const FusedStats g = gpu.Download()[0];
  EXPECT_EQ(cpu.selected, g.selected);
  EXPECT_EQ(cpu.nonfinite, g.nonfinite);
}

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_GPU_TEST_DATA_H_
