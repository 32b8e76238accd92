// The vectorized CPU kernels against plain scalar references built from
// element_math.h, bit for bit: frames (values, scales, packed codes),
// residuals and counts. Built three times (tests/BUILD.bazel): against
// //kernels:cpu (the clone this machine's loader picks), :cpu_v3 (the
// x86-64-v3 clone) and :cpu_baseline (no clones), so every clone is
// checked against the same references and hence against each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gradwire/kernels/cpu/cast.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/cpu/randomk.h"
#include "tests/clone_test_inputs.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// --------------------------------------------------------- references --
// Element by element, in index order, exactly as the contract states.

struct Encoded {
  std::vector<uint8_t> scales, values;
  std::vector<float> residual;
  FusedStats stats;
};

Encoded RefCast(const std::vector<float>& g, const std::vector<float>* e, ValueFormat f) {
  const uint64_t n = g.size();
  Encoded out;
  out.values.assign(n * ValueWidth(f), 0);
  if (e != nullptr) out.residual = *e;
  for (uint64_t i = 0; i < n; ++i) {
    const float a = e != nullptr ? g[i] + (*e)[i] : g[i];
    out.stats.nonfinite += IsFinite(a) ? 0 : 1;
    StoreValue(out.values.data(), i, a, f);
    if (e != nullptr) out.residual[i] = ResidualAfter(a, RoundToFormat(a, f));
  }
  out.stats.selected = n;
  return out;
}

// QSGD (sign: bits 1 and the mean scale) with codes ORed in one by one.
Encoded RefQuantize(const std::vector<float>& g, const std::vector<float>* e, bool sign,
                    uint32_t bits, uint32_t bucket, uint64_t seed, uint64_t step) {
  const uint64_t n = g.size();
  const uint32_t m = QsgdMaxCode(bits);
  const ElementKey rounding = RoundingKey(seed, step);
  Encoded out;
  out.scales.assign(4 * BucketCount(n, bucket), 0);
  out.values.assign(PackedBytes(n, bits), 0);
  std::vector<float> acc(n);
  for (uint64_t i = 0; i < n; ++i) acc[i] = e != nullptr ? g[i] + (*e)[i] : g[i];
  if (e != nullptr) out.residual.resize(n);
  for (uint64_t b = 0; b * bucket < n; ++b) {
    const uint64_t lo = b * bucket, hi = std::min<uint64_t>(n, lo + bucket);
    float scale = 0.0f;
    double sum = 0.0;
    uint64_t finite = 0;
    for (uint64_t i = lo; i < hi; ++i) {
      if (!IsFinite(acc[i])) {
        ++out.stats.nonfinite;
        continue;
      }
      scale = std::max(scale, AbsF(acc[i]));
      sum += AbsF(acc[i]);
      ++finite;
    }
    if (sign) scale = finite > 0 ? static_cast<float>(sum / static_cast<double>(finite)) : 0.0f;
    StoreValue(out.scales.data(), b, scale, ValueFormat::kFp32);
    for (uint64_t i = lo; i < hi; ++i) {
      uint32_t code;
      float decoded;
      if (sign) {
        code = SignCode(acc[i]);
        decoded = SignDecode(code, scale);
      } else {
        code = QsgdQuantizeScaled(acc[i], scale, m, UnitFloat(RoundingHash(rounding, i)));
        decoded = QsgdDequantize(code, scale, m);
      }
      OrPackedCode(out.values.data(), i, code, bits);
      if (e != nullptr) out.residual[i] = ResidualAfter(acc[i], decoded);
    }
  }
  out.stats.selected = n;
  return out;
}

std::vector<float> RefQuantizedDecode(const std::vector<uint8_t>& scales,
                                      const std::vector<uint8_t>& packed, uint64_t n, bool sign,
                                      uint32_t bits, uint32_t bucket, std::vector<float> dense) {
  for (uint64_t i = 0; i < n; ++i) {
    const float scale = LoadValue(scales.data(), i / bucket, ValueFormat::kFp32);
    const uint32_t code = ReadPackedCode(packed.data(), i, bits);
    dense[i] += sign ? SignDecode(code, scale) : QsgdDequantize(code, scale, QsgdMaxCode(bits));
  }
  return dense;
}

// The k smallest RandomKKey, ascending: the first k (key, index) pairs in
// order, nothing shared with the inverse-hash enumeration.
std::vector<uint32_t> RefRandomKIndices(uint64_t seed, uint64_t step, uint64_t n, uint64_t k) {
  const ElementKey stream = RandomKElementKey(seed, step, n);
  std::vector<std::pair<uint32_t, uint32_t>> keyed;
  for (uint32_t i = 0; i < n; ++i) keyed.emplace_back(RandomKKey(stream, i), i);
  std::nth_element(keyed.begin(), keyed.begin() + k, keyed.end());
  std::vector<uint32_t> out;
  for (uint64_t j = 0; j < k; ++j) out.push_back(keyed[j].second);
  std::sort(out.begin(), out.end());
  return out;
}

Encoded RefRandomK(const std::vector<float>& g, const std::vector<float>* e, uint64_t k,
                   uint64_t seed, uint64_t step, ValueFormat f, std::vector<uint32_t>* indices) {
  const uint64_t n = g.size();
  *indices = RefRandomKIndices(seed, step, n, k);
  Encoded out;
  out.values.assign(k * ValueWidth(f), 0);
  if (e != nullptr) out.residual = *e;
  for (uint64_t i = 0, j = 0; i < n; ++i) {
    const float a = e != nullptr ? g[i] + (*e)[i] : g[i];
    out.stats.nonfinite += IsFinite(a) ? 0 : 1;
    float decoded = 0.0f;
    if (j < k && (*indices)[j] == i) {
      StoreValue(out.values.data(), j++, a, f);
      decoded = RoundToFormat(a, f);
    }
    if (e != nullptr) out.residual[i] = ResidualAfter(a, decoded);
  }
  out.stats.selected = k;
  return out;
}

// Values in `format` (packed codes and scales are compared as bytes).
void ExpectSame(const Encoded& want, const Encoded& got, ValueFormat format = ValueFormat::kFp32,
                bool packed = false) {
  EXPECT_EQ(want.scales, got.scales);
  if (packed) {
    EXPECT_EQ(want.values, got.values);
  } else {
    EXPECT_EQ(ValueBits(want.values, format), ValueBits(got.values, format));
  }
  EXPECT_SAME_FLOATS(want.residual, got.residual);
  EXPECT_EQ(want.stats.selected, got.stats.selected);
  EXPECT_EQ(want.stats.nonfinite, got.stats.nonfinite);
}

const uint64_t kSizes[] = {0, 1, 7, 8, 9, 63, 64, 65, 511, 512, 513, 1000, 4099, 20011};
const ValueFormat kFormats[] = {ValueFormat::kFp32, ValueFormat::kFp16, ValueFormat::kBf16};

// -------------------------------------------------------------- tests --

TEST(CpuClonesTest, CastMatchesReference) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : kSizes) {
    for (ValueFormat f : kFormats) {
      for (bool ef : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " format " << static_cast<int>(f) << " ef " << ef);
        const std::vector<float> g = Mixed(n, rng), e0 = Mixed(n, rng);
        const Encoded want = RefCast(g, ef ? &e0 : nullptr, f);
        Encoded got;
        got.values.assign(n * ValueWidth(f), 0xee);
        if (ef) got.residual = e0;
        CastCompress(g.data(), ef ? got.residual.data() : nullptr, n, f, got.values.data(),
                     &got.stats);
        ExpectSame(want, got, f);
        // Decode-accumulate into arbitrary (mixed) dense contents.
        std::vector<float> dense = Mixed(n, rng), ref = dense;
        for (uint64_t i = 0; i < n; ++i) ref[i] += LoadValue(got.values.data(), i, f);
        CastDecodeAccumulate(got.values.data(), n, f, dense.data());
        EXPECT_SAME_FLOATS(ref, dense);
      }
    }
  }
}

// The fp32 cast zeroes the residual and skips the stores where it is +0
// already: residuals of +0 with -0, tiny and NaN lanes sprinkled in, alone
// or in runs, must still all come out +0 (and the values be acc's bits).
TEST(CpuClonesTest, Fp32CastZeroesEveryResidualThatIsNotPlusZero) {
  GRADWIRE_SEEDED_RNG(rng);
  const float kOdd[] = {-0.0f, Bits(1u), Bits(0x80000001u), -1.5f, Bits(0x7fc00001u)};
  for (uint64_t n : kSizes) {
    for (int density : {0, 1, 8, 64}) {  // about one lane in `density` not +0
      SCOPED_TRACE(::testing::Message() << "n " << n << " density " << density);
      const std::vector<float> g = Mixed(n, rng);
      std::vector<float> e0(n, 0.0f);
      for (float& e : e0) e = density > 0 && rng() % density == 0 ? kOdd[rng() % 5] : 0.0f;
      const Encoded want = RefCast(g, &e0, ValueFormat::kFp32);
      Encoded got{{}, std::vector<uint8_t>(4 * n, 0xee), e0, {}};
      CastCompress(g.data(), got.residual.data(), n, ValueFormat::kFp32, got.values.data(),
                   &got.stats);
      ExpectSame(want, got);
    }
  }
}

TEST(CpuClonesTest, HalfAndBf16DecodeEveryValue) {
  for (ValueFormat f : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    std::vector<uint8_t> values(2 * 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      values[2 * h] = static_cast<uint8_t>(h);
      values[2 * h + 1] = static_cast<uint8_t>(h >> 8);
    }
    std::vector<float> dense(65536, -0.0f), ref(65536);
    for (uint32_t h = 0; h < 65536; ++h) ref[h] = -0.0f + LoadValue(values.data(), h, f);
    CastDecodeAccumulate(values.data(), 65536, f, dense.data());
    EXPECT_SAME_FLOATS(ref, dense);
  }
}

TEST(CpuClonesTest, HalfAndBf16EncodeEveryExponent) {
  // Every float exponent and sign, with mantissas at and around the
  // rounding boundaries of both 16-bit formats.
  std::vector<float> g;
  for (uint32_t se = 0; se < 512; ++se) {
    for (uint32_t low : {0u, 1u, 0x0fffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffu, 0x8000u,
                         0x8001u, 0x18000u, 0x7fe000u, 0x7ff000u, 0x7fffffu}) {
      g.push_back(Bits(se << 23 | low));
    }
  }
  for (ValueFormat f : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    const std::vector<float> e0(g.size(), 0.0f);
    const Encoded want = RefCast(g, &e0, f);
    Encoded got;
    got.values.resize(g.size() * 2);
    got.residual = e0;
    CastCompress(g.data(), got.residual.data(), g.size(), f, got.values.data(), &got.stats);
    ExpectSame(want, got, f);
  }
}

// SignCompress (sign) or QsgdCompress against RefQuantize, the same
// bytes; returns what it encoded.
Encoded CompressMatchesReference(const std::vector<float>& g, const std::vector<float>* e0,
                                 bool sign, uint32_t bits, uint32_t bucket, uint64_t seed,
                                 uint64_t step) {
  const uint64_t n = g.size();
  const Encoded want = RefQuantize(g, e0, sign, bits, bucket, seed, step);
  Encoded got;
  got.scales.assign(4 * BucketCount(n, bucket), 0xee);
  got.values.assign(PackedBytes(n, bits), 0xee);
  if (e0 != nullptr) got.residual = *e0;
  float* res = e0 != nullptr ? got.residual.data() : nullptr;
  if (sign) {
    SignCompress(g.data(), res, n, bucket, got.scales.data(), got.values.data(), &got.stats);
  } else {
    QsgdCompress(g.data(), res, n, bits, bucket, seed, step, got.scales.data(), got.values.data(),
                 &got.stats);
  }
  ExpectSame(want, got, ValueFormat::kFp32, /*packed=*/true);
  return got;
}

TEST(CpuClonesTest, QsgdAndSignMatchReference) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : kSizes) {
    for (uint32_t bucket : {1u, 7u, 8u, 64u, 512u, 1500u}) {
      for (int method = 0; method <= 8; ++method) {  // 0: sign, else QSGD bits
        const bool sign = method == 0;
        const uint32_t bits = sign ? 1 : static_cast<uint32_t>(method);
        for (bool ef : {false, true}) {
          const bool mixed = rng() % 2 == 0;
          SCOPED_TRACE(::testing::Message()
                       << "n " << n << " bucket " << bucket << " bits " << bits << " sign " << sign
                       << " ef " << ef << " mixed " << mixed);
          const std::vector<float> g = Input(mixed, n, rng), e0 = Input(mixed, n, rng);
          const Encoded got = CompressMatchesReference(g, ef ? &e0 : nullptr, sign, bits, bucket,
                                                       rng(), rng() % 1000);
          const std::vector<float> start = Mixed(n, rng);
          std::vector<float> dense = start;
          if (sign) {
            SignDecodeAccumulate(got.scales.data(), got.values.data(), n, bucket, dense.data());
          } else {
            QsgdDecodeAccumulate(got.scales.data(), got.values.data(), n, bits, bucket,
                                 dense.data());
          }
          EXPECT_SAME_FLOATS(
              RefQuantizedDecode(got.scales, got.values, n, sign, bits, bucket, start), dense);
        }
      }
    }
  }
}

TEST(CpuClonesTest, QuantizedDecodeEveryCodeAndScale) {
  // Every code value of every width against scales of every class
  // (decoding takes any bytes; only codecs insist on finite scales).
  GRADWIRE_SEEDED_RNG(rng);
  for (int method = 0; method <= 8; ++method) {
    const bool sign = method == 0;
    const uint32_t bits = sign ? 1 : static_cast<uint32_t>(method);
    const uint64_t n = 4 * 256 + 5;
    for (uint32_t bucket : {3u, 256u, 1100u}) {
      std::vector<uint8_t> packed(PackedBytes(n, bits), 0);
      for (uint64_t i = 0; i < n; ++i) OrPackedCode(packed.data(), i, i % (1u << bits), bits);
      const std::vector<float> scale_values = Mixed(BucketCount(n, bucket), rng);
      std::vector<uint8_t> scales(4 * scale_values.size());
      for (uint64_t b = 0; b < scale_values.size(); ++b) {
        StoreValue(scales.data(), b, scale_values[b], ValueFormat::kFp32);
      }
      const std::vector<float> start = Finite(n, rng);
      std::vector<float> dense = start;
      if (sign) {
        SignDecodeAccumulate(scales.data(), packed.data(), n, bucket, dense.data());
      } else {
        QsgdDecodeAccumulate(scales.data(), packed.data(), n, bits, bucket, dense.data());
      }
      SCOPED_TRACE(::testing::Message() << "bits " << bits << " bucket " << bucket);
      EXPECT_SAME_FLOATS(RefQuantizedDecode(scales, packed, n, sign, bits, bucket, start), dense);
    }
  }
}

TEST(CpuClonesTest, SignScaleSumsInIndexOrderWhenRoundingMatters) {
  // 1, 2^-24, then 510 values of 2^-58: in index order the sum is exactly
  // 1 + 2^-24 (every later term is below half an ulp and rounds away), a
  // float tie that rounds down; any order that adds the small ones first
  // keeps them and rounds up. The fast sum must defer to index order.
  const uint64_t n = 512;
  std::vector<float> g(n, std::ldexp(1.0f, -58));
  g[0] = 1.0f;
  g[1] = std::ldexp(1.0f, -24);
  double in_order = 0.0;
  for (float x : g) in_order += x;
  ASSERT_EQ(in_order, 1.0 + std::ldexp(1.0, -24));
  const double small_first = 510 * std::ldexp(1.0, -58) + std::ldexp(1.0, -24) + 1.0;
  ASSERT_NE(static_cast<float>(in_order / n), static_cast<float>(small_first / n));
  for (bool ef : {false, true}) {
    const std::vector<float> e0(n, 0.0f);
    const Encoded want = RefQuantize(g, ef ? &e0 : nullptr, true, 1, 512, 0, 0);
    ASSERT_EQ(LoadValue(want.scales.data(), 0, ValueFormat::kFp32),
              static_cast<float>(in_order / n));
    Encoded got;
    got.scales.resize(4);
    got.values.resize(PackedBytes(n, 1));
    got.residual = e0;
    SignCompress(g.data(), ef ? got.residual.data() : nullptr, n, 512, got.scales.data(),
                 got.values.data(), &got.stats);
    if (!ef) got.residual.clear();
    ExpectSame(want, got, ValueFormat::kFp32, /*packed=*/true);
  }
}

// The one-pass averages (CastDecodeAverage, SignDecodeAverage) against
// zeros, each payload decoded and added in order, then each element
// divided: payloads of random bytes (every NaN, Inf and denormal class of
// each format), sizes off the vector width, divisors with and without an
// exact reciprocal.
std::vector<uint8_t> RandomBytes(uint64_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

TEST(CpuClonesTest, DenseAveragesMatchDecodeIntoZerosThenDivide) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : kSizes) {
    for (uint64_t frames : {1u, 2u, 3u, 5u}) {
      for (float divisor : {1.0f, 4.0f, 0.25f, 3.0f, 0.7f}) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " frames " << frames << " divisor " << divisor);
        for (ValueFormat f : kFormats) {
          std::vector<std::vector<uint8_t>> payloads;
          std::vector<const uint8_t*> at;
          std::vector<float> want(n, 0.0f);
          for (uint64_t r = 0; r < frames; ++r) {
            payloads.push_back(RandomBytes(n * ValueWidth(f), rng));
            at.push_back(payloads.back().data());
            for (uint64_t i = 0; i < n; ++i) want[i] += LoadValue(at.back(), i, f);
          }
          for (float& x : want) x /= divisor;
          std::vector<float> got = Mixed(n, rng);
          CastDecodeAverage(at.data(), frames, n, f, divisor, got.data());
          EXPECT_SAME_FLOATS(want, got) << "format " << static_cast<int>(f);
        }
        for (uint32_t bucket : {1u, 7u, 8u, 64u, 512u, 1500u}) {
          std::vector<std::vector<uint8_t>> scales, packed;
          std::vector<const uint8_t*> scales_at, packed_at;
          std::vector<float> want(n, 0.0f);
          for (uint64_t r = 0; r < frames; ++r) {
            const std::vector<float> s = Mixed(BucketCount(n, bucket), rng);
            scales.emplace_back(4 * s.size());
            for (uint64_t b = 0; b < s.size(); ++b) {
              StoreValue(scales.back().data(), b, s[b], ValueFormat::kFp32);
            }
            packed.push_back(RandomBytes(PackedBytes(n, 1), rng));
            scales_at.push_back(scales.back().data());
            packed_at.push_back(packed.back().data());
          }
          for (uint64_t r = 0; r < frames; ++r) {
            want = RefQuantizedDecode(scales[r], packed[r], n, true, 1, bucket, want);
          }
          for (float& x : want) x /= divisor;
          std::vector<float> got = Mixed(n, rng);
          SignDecodeAverage(scales_at.data(), packed_at.data(), frames, n, bucket, divisor,
                            got.data());
          EXPECT_SAME_FLOATS(want, got) << "sign bucket " << bucket;
          for (uint32_t bits = 1; bits <= 8; ++bits) {
            for (uint64_t r = 0; r < frames; ++r) {
              packed[r] = RandomBytes(PackedBytes(n, bits), rng);
              packed_at[r] = packed[r].data();
            }
            want.assign(n, 0.0f);
            for (uint64_t r = 0; r < frames; ++r) {
              want = RefQuantizedDecode(scales[r], packed[r], n, false, bits, bucket, want);
            }
            for (float& x : want) x /= divisor;
            got = Mixed(n, rng);
            QsgdDecodeAverage(scales_at.data(), packed_at.data(), frames, n, bits, bucket, divisor,
                              got.data());
            EXPECT_SAME_FLOATS(want, got) << "qsgd bits " << bits << " bucket " << bucket;
          }
        }
      }
    }
  }
}

// Buckets whose grid divides (QsgdGridFor: M / (2s) not a normal float)
// amid buckets whose grid multiplies, in the vector loops too: a bucket of
// small float denormals (M / (2s) overflows) and one holding -FLT_MAX (M / (2s)
// a denormal up to 3 bits; no clamp-free path either, 2s overflows).
TEST(CpuClonesTest, QsgdBucketsWhoseGridDividesMatchReference) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint32_t bucket : {64u, 512u}) {
    const uint64_t n = 4 * bucket + 37;
    for (uint32_t bits = 1; bits <= 8; ++bits) {
      SCOPED_TRACE(::testing::Message() << "bucket " << bucket << " bits " << bits);
      std::vector<float> g = Finite(n, rng), e0 = Finite(n, rng);
      float tiny = 0.0f;  // below 2^-139, so M / (2 tiny) > 2^138 overflows
      for (uint64_t i = bucket; i < 3 * bucket; ++i) {
        g[i] = Bits(static_cast<uint32_t>(1 + rng() % 0x400u) | (rng() % 2 ? 0x80000000u : 0u));
        tiny = std::max(tiny, i < 2 * bucket ? AbsF(g[i]) : tiny);
        e0[i] = 0.0f;
      }
      g[2 * bucket + rng() % bucket] = -std::numeric_limits<float>::max();
      ASSERT_TRUE(QsgdGridFor(tiny, QsgdMaxCode(bits)).by_division);
      ASSERT_EQ(QsgdGridFor(std::numeric_limits<float>::max(), QsgdMaxCode(bits)).by_division,
                bits <= 3);
      for (bool ef : {false, true}) {
        CompressMatchesReference(g, ef ? &e0 : nullptr, false, bits, bucket, rng(), rng() % 1000);
      }
    }
  }
}

// More payloads than QsgdDecodeAverage sums in registers at a time.
TEST(CpuClonesTest, QsgdAverageOfManyPayloads) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 1000, frames = 37;
  for (uint32_t bits : {2u, 8u}) {
    std::vector<std::vector<uint8_t>> scales, packed;
    std::vector<const uint8_t*> scales_at, packed_at;
    std::vector<float> want(n, 0.0f);
    for (uint64_t r = 0; r < frames; ++r) {
      const std::vector<float> s = Finite(BucketCount(n, 64), rng);
      scales.emplace_back(4 * s.size());
      for (uint64_t b = 0; b < s.size(); ++b) {
        StoreValue(scales.back().data(), b, s[b], ValueFormat::kFp32);
      }
      packed.push_back(RandomBytes(PackedBytes(n, bits), rng));
      scales_at.push_back(scales.back().data());
      packed_at.push_back(packed.back().data());
      want = RefQuantizedDecode(scales[r], packed[r], n, false, bits, 64, want);
    }
    for (float& x : want) x /= 3.0f;
    std::vector<float> got = Mixed(n, rng);
    QsgdDecodeAverage(scales_at.data(), packed_at.data(), frames, n, bits, 64, 3.0f, got.data());
    EXPECT_SAME_FLOATS(want, got) << "bits " << bits;
  }
}

// QSGD's encode, decode and decode-average with every buffer ending at a
// guard page (a float buffer's end is 4-byte aligned, a packed stream's
// any byte): the same bytes as with ordinary buffers, and nothing read or
// written past an end (which would fault).
TEST(CpuClonesTest, QsgdTouchesNothingPastItsBuffers) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : {1u, 7u, 15u, 16u, 17u, 63u, 100u, 1000u, 4099u}) {
    for (uint32_t bucket : {7u, 8u, 24u, 512u}) {
      for (uint32_t bits = 1; bits <= 8; ++bits) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " bucket " << bucket << " bits " << bits);
        const uint64_t buckets = BucketCount(n, bucket), packed_bytes = PackedBytes(n, bits);
        constexpr uint64_t kFrames = 3;
        std::vector<std::vector<uint8_t>> want_scales, want_packed;
        std::vector<std::unique_ptr<GuardedBytes>> scales, packed;
        std::vector<const uint8_t*> scales_at, packed_at;
        std::vector<float> want(n, 0.0f);
        for (uint64_t r = 0; r < kFrames; ++r) {
          const std::vector<float> g = Finite(n, rng), e = Finite(n, rng);
          GuardedBytes grad(4 * n), residual(4 * n);
          memcpy(grad.data(), g.data(), 4 * n);
          memcpy(residual.data(), e.data(), 4 * n);
          const uint64_t seed = rng();
          const Encoded ref = RefQuantize(g, &e, false, bits, bucket, seed, 1);
          scales.push_back(std::make_unique<GuardedBytes>(4 * buckets));
          packed.push_back(std::make_unique<GuardedBytes>(packed_bytes));
          QsgdCompress(grad.floats(), residual.floats(), n, bits, bucket, seed, 1,
                       scales.back()->data(), packed.back()->data(), nullptr);
          ASSERT_EQ(0, memcmp(ref.scales.data(), scales.back()->data(), 4 * buckets));
          ASSERT_EQ(0, memcmp(ref.values.data(), packed.back()->data(), packed_bytes));
          ASSERT_EQ(0, memcmp(ref.residual.data(), residual.data(), 4 * n));
          scales_at.push_back(scales.back()->data());
          packed_at.push_back(packed.back()->data());
          want = RefQuantizedDecode(ref.scales, ref.values, n, false, bits, bucket, want);
        }
        GuardedBytes decoded(4 * n);
        memset(decoded.data(), 0, 4 * n);
        QsgdDecodeAccumulate(scales_at[0], packed_at[0], n, bits, bucket, decoded.floats());
        const std::vector<float> zeros(n, 0.0f);
        std::vector<uint8_t> first_scales(scales_at[0], scales_at[0] + 4 * buckets);
        std::vector<uint8_t> first_packed(packed_at[0], packed_at[0] + packed_bytes);
        EXPECT_SAME_FLOATS(
            RefQuantizedDecode(first_scales, first_packed, n, false, bits, bucket, zeros),
            std::vector<float>(decoded.floats(), decoded.floats() + n));
        for (float& x : want) x /= 3.0f;
        GuardedBytes out(4 * n);
        QsgdDecodeAverage(scales_at.data(), packed_at.data(), kFrames, n, bits, bucket, 3.0f,
                          out.floats());
        EXPECT_SAME_FLOATS(want, std::vector<float>(out.floats(), out.floats() + n));
      }
    }
  }
}

// RandomKCompress and RandomKIndices against the reference for one case.
void CheckRandomK(uint64_t n, uint64_t k, ValueFormat f, bool ef, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message()
               << "n " << n << " k " << k << " format " << static_cast<int>(f) << " ef " << ef);
  const std::vector<float> g = Mixed(n, rng), e0 = Mixed(n, rng);
  const uint64_t seed = rng(), step = rng() % 1000;
  std::vector<uint32_t> want_indices;
  const Encoded want = RefRandomK(g, ef ? &e0 : nullptr, k, seed, step, f, &want_indices);
  uint64_t temp_bytes = 0;
  RandomKCompress(nullptr, &temp_bytes, nullptr, nullptr, n, k, seed, step, f, nullptr, nullptr,
                  nullptr);
  std::vector<uint64_t> temp(temp_bytes / 8 + 1);
  Encoded got;
  got.values.assign(k * ValueWidth(f), 0xee);
  if (ef) got.residual = e0;
  std::vector<uint32_t> indices(k + 1, 0xeeeeeeeeu);
  RandomKCompress(temp.data(), &temp_bytes, g.data(), ef ? got.residual.data() : nullptr, n, k,
                  seed, step, f, indices.data(), got.values.data(), &got.stats);
  EXPECT_EQ(indices.back(), 0xeeeeeeeeu);  // nothing written past k
  indices.pop_back();
  EXPECT_EQ(want_indices, indices);
  ExpectSame(want, got, f);
  std::vector<uint32_t> derived(k);
  RandomKIndices(temp.data(), &temp_bytes, seed, step, n, k, derived.data());
  EXPECT_EQ(want_indices, derived);
  // Values only (null indices, as a random-k frame is encoded): the same
  // values, residual and counts.
  Encoded values_only;
  values_only.values.assign(k * ValueWidth(f), 0xee);
  if (ef) values_only.residual = e0;
  RandomKCompress(temp.data(), &temp_bytes, g.data(), ef ? values_only.residual.data() : nullptr, n,
                  k, seed, step, f, nullptr, values_only.values.data(), &values_only.stats);
  ExpectSame(want, values_only, f);
}

TEST(CpuClonesTest, RandomKMatchesReference) {
  GRADWIRE_SEEDED_RNG(rng);
  for (uint64_t n : kSizes) {
    std::vector<uint64_t> ks = {0, n, n / 2, n / 100, n > 0 ? n - 1 : 0, n > 0 ? rng() % n : 0};
    for (uint64_t k : ks) {
      for (ValueFormat f : kFormats) {
        for (bool ef : {false, true}) CheckRandomK(n, k, f, ef, rng);
      }
    }
  }
}

// Above 2M elements (a bitmap past 256 KiB) a dense selection is hashed
// forward instead of marked in the bitmap (randomk.cc): the same set.
TEST(CpuClonesTest, RandomKHashedForwardAboveTheBitmapCap) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = (uint64_t{1} << 21) + 1001;
  CheckRandomK(n, n / 10, ValueFormat::kFp32, true, rng);
  CheckRandomK(n, n / 3, ValueFormat::kFp16, false, rng);
}

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
