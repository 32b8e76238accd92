// SparseAverage (the chunked receive side of a sparse allgather) against
// the sequence it replaces: zero out, SparseDecodeAccumulate every run in
// order, divide each touched element once. Bit for bit, on fresh random
// runs of every density regime (memset or chunk zeroing, scaled whole or
// entry by entry), divisors with exact and inexact reciprocals, shared
// index lists, all three value formats, lengths that end mid-chunk, and
// ordinary or streaming stores into out at any offset from a cache line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gradwire/kernels/cpu/sparse.h"
#include "gradwire/kernels/cpu/sparse_sum.h"
#include "gradwire/kernels/cpu/varint_average.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace {

struct Runs {
  std::vector<std::vector<uint32_t>> indices;
  std::vector<std::vector<uint8_t>> values;
  std::vector<SparsePayload> runs;
};

// p runs over n elements, each holding about density * n entries (at
// least one element apart, strictly increasing). With `share`, every run
// uses run 0's indices, as random-k frames of one step do.
Runs MakeRuns(std::mt19937_64& rng, uint64_t n, int p, double density, ValueFormat format,
              bool share) {
  Runs out;
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<float> normal;
  out.indices.resize(p);
  out.values.resize(p);
  for (int r = 0; r < p; ++r) {
    if (r == 0 || !share) {
      for (uint64_t i = 0; i < n; ++i) {
        if (u(rng) < density) out.indices[r].push_back(static_cast<uint32_t>(i));
      }
    } else {
      out.indices[r] = out.indices[0];
    }
    const uint64_t k = out.indices[r].size();
    const uint32_t width = ValueWidth(format);
    out.values[r].resize(k * width);
    for (uint64_t j = 0; j < k; ++j) {
      // Random bit patterns of 16-bit formats; for fp32 a heavy-tailed
      // mix including subnormals and exact cancellations.
      if (format == ValueFormat::kFp32) {
        float v = normal(rng) * std::pow(10.0f, static_cast<float>(rng() % 12) - 6);
        if (rng() % 50 == 0) v = 1e-41f * (rng() % 2 ? 1 : -1);  // subnormal
        std::memcpy(&out.values[r][4 * j], &v, 4);
      } else {
        uint16_t h = static_cast<uint16_t>(rng());
        if ((h & 0x7c00) == 0x7c00 && format == ValueFormat::kFp16) h &= 0xbfff;  // finite
        if ((h & 0x7f80) == 0x7f80 && format == ValueFormat::kBf16) h &= 0xbfff;
        std::memcpy(&out.values[r][2 * j], &h, 2);
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    out.runs.push_back(
        {out.indices[r].data(), out.values[r].data(), out.indices[r].size(), format});
  }
  return out;
}

std::vector<float> Reference(const Runs& runs, ValueFormat format, float divisor, uint64_t n) {
  std::vector<float> out(n, 0.0f);
  std::vector<bool> touched(n, false);
  for (const SparsePayload& run : runs.runs) {
    cpu::SparseDecodeAccumulate(run.indices, run.values, run.count, format, out.data());
    for (uint64_t j = 0; j < run.count; ++j) touched[run.indices[j]] = true;
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (touched[i]) out[i] /= divisor;
  }
  return out;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// Runs `average` into a span of want.size() floats `offset` floats into a
// buffer of old contents: its bits must be want's, and nothing outside the
// span may be written.
void ExpectAverageAt(uint64_t offset, const std::vector<float>& want,
                     const std::function<void(absl::Span<float>)>& average) {
  const uint64_t n = want.size();
  std::vector<float> storage(n + 16, 123.0f);  // old contents must not leak
  average(absl::MakeSpan(storage).subspan(offset, n));
  const std::vector<float> out(storage.begin() + offset, storage.begin() + offset + n);
  ASSERT_NO_FATAL_FAILURE(ExpectSameBits(out, want));
  for (uint64_t i = 0; i < storage.size(); ++i) {
    if (i < offset || i >= offset + n) {
      ASSERT_EQ(storage[i], 123.0f) << i;
    }
  }
}

TEST(SparseAverageTest, SameBitsAsZeroAccumulateDivide) {
  GRADWIRE_SEEDED_RNG(rng);
  const float divisors[] = {1.0f, 2.0f, 3.0f, 4.0f, 0.7f, 0.125f, 5.0f, std::ldexp(1.0f, 100),
                            std::ldexp(1.0f, -130),
                            // Divisors no caller passes (DecodeAverage refuses them) still give
                            // the reference's bits: untouched elements +0, touched ones divided.
                            -2.0f, -0.7f, INFINITY, NAN};
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
    for (double density : {0.0005, 0.01, 0.05, 0.3, 1.0}) {
      for (int p : {1, 2, 3, 4, 5}) {
        for (bool share : {false, true}) {
          // Lengths ending mid-chunk, below one chunk, and empty.
          const uint64_t n = (rng() % 3 == 0) ? rng() % 5000 : 20000 + rng() % 30000;
          const Runs runs = MakeRuns(rng, n, p, density, format, share);
          for (float divisor : divisors) {
            const std::vector<float> want = Reference(runs, format, divisor, n);
            // Either store (streaming ones from the first whole line on),
            // with out at any float offset from a cache line.
            for (cpu::OutStores stores : {cpu::OutStores::kCached, cpu::OutStores::kStreaming}) {
              const uint64_t offset = rng() % 16;
              SCOPED_TRACE(::testing::Message()
                           << "format " << static_cast<int>(format) << " density " << density
                           << " p " << p << " share " << share << " n " << n << " divisor "
                           << divisor << " streaming " << (stores == cpu::OutStores::kStreaming)
                           << " offset " << offset);
              ASSERT_NO_FATAL_FAILURE(ExpectAverageAt(offset, want, [&](absl::Span<float> out) {
                cpu::SparseAverage(runs.runs, divisor, out, stores);
              }));
            }
          }
        }
      }
    }
  }
}

// A run's indices as a frame's delta-varint section carries them: the
// first index, then each gap minus one, LEB128.
std::vector<uint8_t> DeltaVarints(const SparsePayload& run) {
  std::vector<uint8_t> out;
  uint64_t prev = 0;
  for (uint64_t j = 0; j < run.count; ++j) {
    uint64_t v = j == 0 ? run.indices[0] : run.indices[j] - prev - 1;
    prev = run.indices[j];
    do {
      out.push_back(static_cast<uint8_t>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
      v >>= 7;
    } while (v != 0);
  }
  return out;
}

std::vector<DeltaVarintPayload> VarintPayloads(const Runs& runs,
                                                    std::vector<std::vector<uint8_t>>* sections) {
  std::vector<DeltaVarintPayload> out;
  sections->clear();
  for (const SparsePayload& run : runs.runs) sections->push_back(DeltaVarints(run));
  for (size_t r = 0; r < runs.runs.size(); ++r) {
    const SparsePayload& run = runs.runs[r];
    out.push_back({(*sections)[r].data(), (*sections)[r].size(), run.values, run.count,
                   run.format});
  }
  return out;
}

// DeltaVarintAverage (the indices decoded as they are added) gives
// SparseAverage's bits, for every density (one-, two- and three-byte
// gaps; every element), value format, divisor and store, with out at any
// offset from a cache line, and writes nothing outside out.
TEST(SparseAverageTest, DeltaVarintAverageIsSparseAverage) {
  GRADWIRE_SEEDED_RNG(rng);
  const float divisors[] = {4.0f, 3.0f, 1.0f, 0.125f, -2.0f, INFINITY, NAN, 0.0f};
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16}) {
    for (double density : {0.00002, 0.0005, 0.02, 0.3, 1.0}) {
      for (int p : {1, 4}) {
        const uint64_t n = (rng() % 4 == 0) ? rng() % 3000 : 100003 + rng() % 5000;
        const Runs runs = MakeRuns(rng, n, p, density, format, /*share=*/false);
        std::vector<std::vector<uint8_t>> sections;
        const std::vector<DeltaVarintPayload> payloads = VarintPayloads(runs, &sections);
        for (float divisor : divisors) {
          const std::vector<float> want = Reference(runs, format, divisor, n);
          for (cpu::OutStores stores : {cpu::OutStores::kCached, cpu::OutStores::kStreaming}) {
            const uint64_t offset = rng() % 16;
            SCOPED_TRACE(::testing::Message()
                         << "format " << static_cast<int>(format) << " density " << density
                         << " p " << p << " n " << n << " divisor " << divisor << " streaming "
                         << (stores == cpu::OutStores::kStreaming) << " offset " << offset);
            ASSERT_NO_FATAL_FAILURE(ExpectAverageAt(offset, want, [&](absl::Span<float> out) {
              cpu::DeltaVarintAverage(payloads, divisor, out, stores);
            }));
          }
        }
      }
    }
  }
}

// A section the caller should have refused stays inside its bytes: one
// cut short ends its payload at the last whole varint, one whose index
// reaches n ends it before that index; the other payloads are summed.
TEST(SparseAverageTest, DeltaVarintAverageStopsABadSection) {
  const uint64_t n = 5000;
  const float values[3] = {1.0f, 2.0f, 4.0f};
  const uint8_t* v = reinterpret_cast<const uint8_t*>(values);
  // Indices 10, 12, then a gap varint cut after its first byte.
  const uint8_t cut[] = {10, 1, 0x80};
  // Indices 7, then 7 + 6000 (past n).
  const uint8_t past[] = {7, 0xef, 0x2e};
  const uint8_t good[] = {7};
  const std::vector<DeltaVarintPayload> payloads = {
      {cut, sizeof(cut), v, 3, ValueFormat::kFp32},
      {past, sizeof(past), v, 2, ValueFormat::kFp32},
      {good, sizeof(good), v + 8, 1, ValueFormat::kFp32}};
  std::vector<float> out(n, -1.0f);
  cpu::DeltaVarintAverage(payloads, 1.0f, absl::MakeSpan(out), cpu::OutStores::kCached);
  for (uint64_t i = 0; i < n; ++i) {
    const float want = i == 10 ? 1.0f : i == 12 ? 2.0f : i == 7 ? 5.0f : 0.0f;
    ASSERT_EQ(out[i], want) << i;
  }
}

TEST(SparseAverageTest, UntouchedElementsArePositiveZero) {
  std::vector<uint32_t> idx = {5};
  const float v = -3.0f;
  const SparsePayload run{idx.data(), reinterpret_cast<const uint8_t*>(&v), 1, ValueFormat::kFp32};
  std::vector<float> out(10000, -1.0f);
  cpu::SparseAverage({run}, 4.0f, absl::MakeSpan(out));
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 5) {
      EXPECT_EQ(out[i], -0.75f);
    } else {
      ASSERT_FALSE(std::signbit(out[i])) << i;
      ASSERT_EQ(out[i], 0.0f) << i;
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace gradwire
