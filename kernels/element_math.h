// Per-element math shared by the CPU reference kernels and the CUDA kernels.
//
// Everything here is an inline function marked GRADWIRE_HD, which is
// `__host__ __device__` under nvcc and nothing otherwise, so the CPU tests
// exercise exactly the arithmetic the GPU runs. Hence: no absl, no std
// containers, no exceptions, no <cmath> calls whose device and host
// versions could differ; only integer ops and correctly rounded IEEE
// single-precision + - * / (nvcc: -prec-div=true, the default).
//
// Contents: fp32 <-> fp16/bf16 conversion, the magnitude key that orders
// elements for top-k, a counter-based hash (random-k indices, stochastic
// rounding), QSGD levels, sign encoding, bit packing, little-endian value
// storage, and the error-feedback residual rule.
#ifndef GRADWIRE_KERNELS_ELEMENT_MATH_H_
#define GRADWIRE_KERNELS_ELEMENT_MATH_H_

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define GRADWIRE_HD __host__ __device__
#else
#define GRADWIRE_HD
#endif

namespace gradwire {
namespace kernels {

// ---------------------------------------------------------------- bits --

GRADWIRE_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

GRADWIRE_HD inline float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

GRADWIRE_HD inline bool IsNan(float f) { return (FloatBits(f) & 0x7fffffffu) > 0x7f800000u; }
GRADWIRE_HD inline bool IsFinite(float f) { return (FloatBits(f) & 0x7f800000u) != 0x7f800000u; }
GRADWIRE_HD inline float AbsF(float f) { return BitsFloat(FloatBits(f) & 0x7fffffffu); }

// a * b rounded once. On the device nvcc would otherwise contract a product
// followed by an add into an FMA, and the decoded value (hence the
// error-feedback residual) would differ from the CPU's by one rounding.
GRADWIRE_HD inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// ------------------------------------------------------- fp16 and bf16 --
// Round to nearest, ties to even, bit exact. A finite value too large for
// the format saturates to the largest finite value instead of becoming
// infinity (an overflowing gradient element then leaves a finite residual
// for error feedback to carry); ±Inf stays ±Inf, NaN stays a (quiet) NaN.

inline constexpr uint16_t kHalfMaxBits = 0x7bff;  // 65504
inline constexpr uint16_t kBf16MaxBits = 0x7f7f;  // 3.3895314e38

GRADWIRE_HD inline uint16_t FloatToHalfBits(float f) {
  // Every case is computed and the answer selected, without branches, so
  // CPU loops vectorize (after F. Giesen's float_to_half_fast3_rtne).
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // Normal result: rebias the exponent (127 -> 15), round the 13 dropped
  // bits to nearest even; a carry into the exponent is the right answer.
  const uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 the result is a half subnormal, a multiple of 2^-24: adding
  // 0.5f makes the FPU round |f| to that multiple (nearest even), and the
  // sum's low bits are the count of 2^-24 units (0x400 = smallest normal).
  const uint32_t subnormal = FloatBits(BitsFloat(a) + 0.5f) - 0x3f000000u;
  uint32_t r = a < 0x38800000u ? subnormal : normal;
  // 65520 (0x477ff000) is halfway between 65504 and 2^16; it and everything
  // above would round to infinity: saturate instead.
  r = a >= 0x477ff000u ? kHalfMaxBits : r;
  r = a == 0x7f800000u ? 0x7c00u : r;
  r = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x1ffu)) : r;  // stays a NaN
  return static_cast<uint16_t>(sign | r);
}

GRADWIRE_HD inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return BitsFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    // m * 2^-24: both factors exact, so the product is exact.
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return BitsFloat(FloatBits(v) | sign);
  }
  return BitsFloat(sign | ((e + 112u) << 23) | (m << 13));
}

GRADWIRE_HD inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // keep it a NaN
  if (a == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
  if (a >= 0x7f7f8000u) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | kBf16MaxBits);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

GRADWIRE_HD inline float Bf16BitsToFloat(uint16_t b) {
  return BitsFloat(static_cast<uint32_t>(b) << 16);
}

// --------------------------------------------------------- value storage --
// How a sparse method stores each value on the wire. Numbering matches
// gradwire's wire-format ValueType for the three float formats.
enum class ValueFormat : uint8_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

GRADWIRE_HD inline uint32_t ValueWidth(ValueFormat f) { return f == ValueFormat::kFp32 ? 4u : 2u; }

// The value a receiver will decode for `x`: x rounded to the format.
GRADWIRE_HD inline float RoundToFormat(float x, ValueFormat f) {
  switch (f) {
    case ValueFormat::kFp16:
      return HalfBitsToFloat(FloatToHalfBits(x));
    case ValueFormat::kBf16:
      return Bf16BitsToFloat(FloatToBf16Bits(x));
    default:
      return x;
  }
}

// Element i of a little-endian value array at `p` (any alignment: wire
// sections start at arbitrary byte offsets).
GRADWIRE_HD inline void StoreValue(uint8_t* p, uint64_t i, float x, ValueFormat f) {
  if (f == ValueFormat::kFp32) {
    const uint32_t u = FloatBits(x);
    uint8_t* q = p + 4 * i;
    q[0] = static_cast<uint8_t>(u);
    q[1] = static_cast<uint8_t>(u >> 8);
    q[2] = static_cast<uint8_t>(u >> 16);
    q[3] = static_cast<uint8_t>(u >> 24);
    return;
  }
  const uint16_t h = f == ValueFormat::kFp16 ? FloatToHalfBits(x) : FloatToBf16Bits(x);
  p[2 * i] = static_cast<uint8_t>(h);
  p[2 * i + 1] = static_cast<uint8_t>(h >> 8);
}

GRADWIRE_HD inline float LoadValue(const uint8_t* p, uint64_t i, ValueFormat f) {
  if (f == ValueFormat::kFp32) {
    const uint8_t* q = p + 4 * i;
    return BitsFloat(static_cast<uint32_t>(q[0]) | static_cast<uint32_t>(q[1]) << 8 |
                     static_cast<uint32_t>(q[2]) << 16 | static_cast<uint32_t>(q[3]) << 24);
  }
  const uint16_t h = static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
  return f == ValueFormat::kFp16 ? HalfBitsToFloat(h) : Bf16BitsToFloat(h);
}

// ------------------------------------------------------ error feedback --
// The new residual for an element whose accumulated value is `acc` and
// whose decoded value is `decoded`: fl(acc - decoded), except that a
// non-finite result becomes 0 so one NaN/Inf step cannot poison every
// later step through the residual.
GRADWIRE_HD inline float ResidualAfter(float acc, float decoded) {
  const float r = acc - decoded;
  return IsFinite(r) ? r : 0.0f;
}

// ------------------------------------------------------- magnitude key --
// Orders elements for top-k: a larger key is a larger |x|. NaN is 0, below
// every number (a NaN is never selected ahead of a finite value, and NaNs
// are only chosen when k exceeds the count of non-NaN elements); ±0 is 1;
// ±Inf is the largest key, 0x7f800001. Equal keys are broken by the lower
// index everywhere in gradwire.
inline constexpr uint32_t kMaxMagnitudeKey = 0x7f800001u;

GRADWIRE_HD inline uint32_t MagnitudeKey(float x) {
  const uint32_t a = FloatBits(x) & 0x7fffffffu;
  return a > 0x7f800000u ? 0u : a + 1u;
}

// ------------------------------------------------ counter-based hashing --
// A stateless hash of (seed, step, index): every rank, CPU or GPU, derives
// the same random numbers without communicating or keeping RNG state.
// Streams separate independent uses of one (seed, step).
//
// Two levels. StreamKey mixes (seed, step, stream) into 64 bits once per
// call with splitmix64's finalizer (two 64-bit multiplies, cost paid once).
// ElementHash, run once per element, is a keyed bijection on `bits`-bit
// integers (16 <= bits <= 32) built from 32-bit operations only:
//
//   x = (index + add) mod 2^bits
//   x = Round(x);  x ^= mix;  x = Round(x)
//   Round(x) = xorshift(s), * kHashMul1, xorshift(s), * kHashMul2, xorshift(s)
//
// where add and mix are the stream key's halves (cut to `bits`), products
// are taken mod 2^bits, xorshift(s) is x ^= x >> s and s = ceil(bits / 2).
// At bits = 32, Round is C. Wellons' "lowbias32" finalizer (its middle
// shift 16 instead of 15). Why this shape:
//  - Cost. splitmix64 per element took two 64-bit multiplies, which x86
//    below AVX-512 has no vector instruction for: ~1.2 ns an element on
//    one core after an 8-lane rewrite, several times a memcpy of the
//    element. Two rounds here are 4 pmulld and 6 shifts, 8 lanes per AVX2
//    instruction, and on a GPU 32-bit multiplies are native too.
//  - Quality. One round of lowbias32 has low but measurable bias; the key
//    half injected between two rounds makes each step's function a fresh
//    one, and the adding key makes every index's hash exactly uniform over
//    steps (QSGD's RoundingHash keeps that with one round).
//    tests/element_math_test.cc checks uniformity and independence across
//    indices and steps; tests/randomk_test.cc the selection's uniformity.
//  - Invertibility. Every step is a bijection of [0, 2^bits) with an
//    inverse of the same cost (s >= bits / 2 makes each xorshift its own
//    inverse; the multipliers are odd). Random-k needs it: see RandomKKey.
//
// A change of this function changes random-k's indices, which receivers
// re-derive: it needs a new random-k frame version (lib/codec/wire_format.h).
inline constexpr uint64_t kStreamRandomK = 1;
inline constexpr uint64_t kStreamRounding = 2;
inline constexpr uint64_t kGolden64 = 0x9e3779b97f4a7c15ull;
inline constexpr uint32_t kHashMul1 = 0x7feb352du;
inline constexpr uint32_t kHashMul2 = 0x846ca68bu;
inline constexpr uint32_t kHashMul1Inverse = 0x1d69e2a5u;  // mod 2^32 (and so mod 2^bits)
inline constexpr uint32_t kHashMul2Inverse = 0x43021123u;
static_assert(kHashMul1 * kHashMul1Inverse == 1u && kHashMul2 * kHashMul2Inverse == 1u,
              "multiplier inverses");
inline constexpr uint32_t kMinHashBits = 16;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
GRADWIRE_HD inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Per-call key: hoist out of element loops.
GRADWIRE_HD inline uint64_t StreamKey(uint64_t seed, uint64_t step, uint64_t stream) {
  return Mix64(Mix64(seed ^ (stream * kGolden64)) + step * 0xd6e8feb86659fd93ull + stream);
}

// A general 64-bit hash of (seed, step, stream, index) for test and
// benchmark data; no kernel's output depends on it.
GRADWIRE_HD inline uint64_t CounterHash(uint64_t seed, uint64_t step, uint64_t stream,
                                        uint64_t index) {
  return Mix64(StreamKey(seed, step, stream) + (index + 1) * kGolden64);
}

// ElementHash's per-call parameters: the stream key cut to `bits`.
struct ElementKey {
  uint32_t add;    // added to the index
  uint32_t mix;    // xored in between the rounds
  uint32_t bits;   // kMinHashBits..32
  uint32_t shift;  // ceil(bits / 2)
  uint32_t mask;   // 2^bits - 1
};

GRADWIRE_HD inline ElementKey MakeElementKey(uint64_t stream_key, uint32_t bits) {
  ElementKey k;
  k.bits = bits;
  k.shift = (bits + 1) / 2;
  k.mask = 0xffffffffu >> (32 - bits);
  k.add = static_cast<uint32_t>(stream_key) & k.mask;
  k.mix = static_cast<uint32_t>(stream_key >> 32) & k.mask;
  return k;
}

// One round: xorshift, * mul_a, xorshift, * mul_b, xorshift (mod 2^bits).
GRADWIRE_HD inline uint32_t HashRoundWith(uint32_t x, const ElementKey& k, uint32_t mul_a,
                                          uint32_t mul_b) {
  x ^= x >> k.shift;
  x = (x * mul_a) & k.mask;
  x ^= x >> k.shift;
  x = (x * mul_b) & k.mask;
  return x ^ (x >> k.shift);
}

GRADWIRE_HD inline uint32_t HashRound(uint32_t x, const ElementKey& k) {
  return HashRoundWith(x, k, kHashMul1, kHashMul2);
}

// The xorshifts are their own inverses (shift >= bits / 2): the inverse
// round is the round with the inverse multipliers in reverse order.
GRADWIRE_HD inline uint32_t HashRoundInverse(uint32_t x, const ElementKey& k) {
  return HashRoundWith(x, k, kHashMul2Inverse, kHashMul1Inverse);
}

// The hash of element `index` (its low `bits` bits) under `key`: a
// bijection of [0, 2^bits) for each key.
GRADWIRE_HD inline uint32_t ElementHash(const ElementKey& key, uint64_t index) {
  const uint32_t x = (static_cast<uint32_t>(index) + key.add) & key.mask;
  return HashRound(HashRound(x, key) ^ key.mix, key);
}

// The index in [0, 2^bits) whose ElementHash is `hash`.
GRADWIRE_HD inline uint32_t ElementHashInverse(const ElementKey& key, uint32_t hash) {
  return (HashRoundInverse(HashRoundInverse(hash, key) ^ key.mix, key) - key.add) & key.mask;
}

// QSGD's rounding: 32-bit hashes (indices beyond 2^32 repeat them).
GRADWIRE_HD inline ElementKey RoundingKey(uint64_t seed, uint64_t step) {
  return MakeElementKey(StreamKey(seed, step, kStreamRounding), 32);
}

// The hash behind element `index`'s rounding uniform: ONE round,
//   Round(((index * kRoundingStride + add) mod 2^32) ^ mix),
// where ElementHash takes two. Rounding needs no inverse, only that each
// index's hash be exactly uniform over steps (what makes QSGD unbiased:
// the adding key gives it) and that neighbouring elements' uniforms look
// unrelated within a step. One round on consecutive inputs fails the
// second, measurably (pairs of neighbours' top bits: chi-square 296 on
// average for 255 degrees of freedom, up to 620, over 2^22 elements);
// spreading the inputs by the odd stride first passes it as two rounds
// do (246 on average, at most 293), and costs nothing in a loop, which
// steps the input by a constant. Like QsgdGridFor's multiply, this is the
// sender's choice alone: receivers never derive it. tests/element_math_test.cc checks
// uniformity and neighbours' independence; tests/quantize_test.cc
// unbiasedness over steps and seeds.
inline constexpr uint32_t kRoundingStride = 0x9e3779b9u;  // 2^32 / golden ratio, odd

// RoundingHash's input before the mix; consecutive indices' inputs step
// by kRoundingStride, which the vector loops add instead.
GRADWIRE_HD inline uint32_t RoundingHashInput(const ElementKey& key, uint64_t index) {
  return static_cast<uint32_t>(index) * kRoundingStride + key.add;
}

GRADWIRE_HD inline uint32_t RoundingHash(const ElementKey& key, uint64_t index) {
  return HashRound(RoundingHashInput(key, index) ^ key.mix, key);
}

// Uniform in [0, 1) from a 32-bit hash's top 24 bits (exactly
// representable).
GRADWIRE_HD inline float UnitFloat(uint32_t hash) {
  return static_cast<float>(hash >> 8) * 5.9604644775390625e-8f;
}

// Random-k over n elements hashes on the smallest width that holds every
// index, and at least kMinHashBits: ceil(log2 n), clamped to [16, 32].
GRADWIRE_HD inline uint32_t RandomKHashBits(uint64_t n) {
  uint32_t bits = kMinHashBits;
  while (bits < 32 && (uint64_t{1} << bits) < n) ++bits;
  return bits;
}

GRADWIRE_HD inline ElementKey RandomKElementKey(uint64_t seed, uint64_t step, uint64_t n) {
  return MakeElementKey(StreamKey(seed, step, kStreamRandomK), RandomKHashBits(n));
}

// Random-k selects the k elements with the SMALLEST key, key =
// RandomKKey(RandomKElementKey(seed, step, n), index). For one key the
// keys of [0, n) are distinct (a bijection), so there are no ties. The k
// smallest are also the first k indices below n met in
// ElementHashInverse(key, 0), (.., 1), ...: about k * 2^bits / n <= 2k
// inverse hashes instead of n hashes (the CPU does that; the GPU ranks all
// n keys; both give the same set).
GRADWIRE_HD inline uint32_t RandomKKey(const ElementKey& key, uint64_t index) {
  return ElementHash(key, index);
}

// ------------------------------------------------------------------ QSGD --
// b-bit stochastic quantization (1 <= b <= 8) against a per-bucket scale
// s = max |x| over the bucket's finite elements. The 2^b codes
// q = 0 .. M (M = 2^b - 1) stand for the evenly spaced levels
//   level(q) = RN((2q - M) * step),   step = s / M rounded toward zero,
// about -s, ..., +s, so b = 1 is stochastic sign (step = s, levels
// exactly ±s). Rounding between the two neighbouring levels is stochastic
// and unbiased: E[decoded] = x, |decoded - x| < 2s/M and variance <=
// (s/M)^2, each up to float rounding (the step is within 2^-23 of s / M).
// A bucket whose scale is 0 (all zeros) decodes to exact zeros; no
// division by the scale happens then.
//
// The level is one multiply of an exact small integer (2q - M, odd) by a
// per-bucket constant: odd in 2q - M (level(M - q) = -level(q)), never
// above s in magnitude (M * step <= s exactly, and RN is monotone, so the
// levels cannot overflow even at s = FLT_MAX), and three vector
// operations an element (convert, 2q - M by a fused multiply-subtract,
// multiply). Frames of version 1 (before 2026-12-07) meant
// RN(RN((2q - M) / M) * s), exact at ±s but five operations an element
// (docs/wire_format.md, "Versioning").

GRADWIRE_HD inline uint32_t QsgdMaxCode(uint32_t bits) { return (1u << bits) - 1u; }

// The step s / M rounded toward zero, for a finite scale s >= 0 (what
// encoders write and codecs accept). The product of a float and M < 2^8 is
// exact in double: RN(s / M) is above s / M in magnitude exactly when its
// product with M is above s, and RN is within one float of s / M, so one
// float down is then RZ. No branch: decoders take a step for every bucket
// of every frame (the vector loops test the same by a fused multiply-add,
// qsgd_levels.h).
GRADWIRE_HD inline float QsgdLevelStep(float scale, uint32_t max_code) {
  const float c = scale / static_cast<float>(max_code);
  const double c_magnitude = BitsFloat(FloatBits(c) & 0x7fffffffu);
  const double s_magnitude = BitsFloat(FloatBits(scale) & 0x7fffffffu);
  const uint32_t over = c_magnitude * static_cast<double>(max_code) > s_magnitude ? 1u : 0u;
  return BitsFloat(FloatBits(c) - over);
}

// 2q - M: the level's integer multiple of the step, odd, in [-M, M].
GRADWIRE_HD inline float QsgdLevelMultiple(uint32_t code, uint32_t max_code) {
  return static_cast<float>(static_cast<int32_t>(2 * code) - static_cast<int32_t>(max_code));
}

// level(q) for a bucket whose step (QsgdLevelStep) is `step`.
GRADWIRE_HD inline float QsgdLevel(uint32_t code, float step, uint32_t max_code) {
  return MulRn(QsgdLevelMultiple(code, max_code), step);
}

GRADWIRE_HD inline float QsgdDequantize(uint32_t code, float scale, uint32_t max_code) {
  return QsgdLevel(code, QsgdLevelStep(scale, max_code), max_code);
}

// Where x lies on one bucket's level grid: t in [0, M], level(q) at t = q.
// The encode's contract (the decoder never needs it; changing it changes
// which codes a sender picks, not what they mean):
//
//   t = RN(RN(x * c) + M/2),   c = M / (2s) rounded toward zero,
//
// one multiply and one add an element instead of a division. (The
// division and RoundingHash's second round of before took a fifth of the
// x86-64-v3 encode: docs/results/2026-11-30-qsgd-encode.md.) Rounding c
// toward zero makes |RN(x * c)| <= M/2 for every |x| <= s (RN is
// monotone), so t stays in [0, M] without clamps. Where RN(M / (2s)) is
// not a normal float (s below about M * 2^-129, or above M * 2^125 at 1-3
// bits), c would overflow or lose bits and the grid falls back to the
// division, t = RN(RN(RN(x / s) + 1) * M/2). The CPU builds the grid with
// QsgdGridFor once a bucket, the GPU once an element.
struct QsgdGrid {
  float scale;     // s > 0
  float half;      // M / 2, exact
  float per_unit;  // c (unused by_division)
  float step;      // QsgdLevelStep(s, M): the decoded levels' step, for the residuals
  bool by_division;
};

GRADWIRE_HD inline QsgdGrid QsgdGridFor(float scale, uint32_t max_code) {
  QsgdGrid g;
  g.scale = scale;
  g.half = 0.5f * static_cast<float>(max_code);
  float c = g.half / scale;
  // The product of two floats is exact in double: a finite c is above
  // M / (2s) exactly when c * s is above M/2; one step down is then RZ
  // (RN is within one step). An overflow stays Inf.
  if (IsFinite(c) &&
      static_cast<double>(c) * static_cast<double>(scale) > static_cast<double>(g.half)) {
    c = BitsFloat(FloatBits(c) - 1u);
  }
  const uint32_t e = FloatBits(c) & 0x7f800000u;
  g.by_division = e == 0u || e == 0x7f800000u;  // zero, subnormal, Inf or NaN
  g.per_unit = c;
  g.step = QsgdLevelStep(scale, max_code);
  return g;
}

GRADWIRE_HD inline float QsgdPosition(float x, const QsgdGrid& g) {
  if (g.by_division) return MulRn(x / g.scale + 1.0f, g.half);
  return MulRn(x, g.per_unit) + g.half;
}

// The code of every element of a bucket whose scale is 0 (nothing finite
// and nonzero): the middle one, which decodes to 0 * scale = 0. No grid is
// built for such a bucket.
GRADWIRE_HD inline uint32_t QsgdZeroScaleCode(uint32_t max_code) { return (max_code + 1) / 2; }

// Code for x on the grid of its bucket (scale > 0) and a uniform u in
// [0, 1). NaN maps to code 0 and ±Inf to the extreme codes (their residual
// is reset anyway).
GRADWIRE_HD inline uint32_t QsgdQuantize(float x, const QsgdGrid& grid, uint32_t max_code,
                                         float u) {
  if (IsNan(x)) return 0;
  const float t = QsgdPosition(x, grid);
  if (!(t > 0.0f)) return 0;
  if (t >= static_cast<float>(max_code)) return max_code;
  const uint32_t lo = static_cast<uint32_t>(t);  // t > 0, so truncation is floor
  const float frac = t - static_cast<float>(lo);
  return lo + (u < frac ? 1u : 0u);
}

// QsgdQuantize for a bucket of scale `scale` (0 for a bucket with nothing
// finite and nonzero); builds the grid each call, for tests and the GPU.
GRADWIRE_HD inline uint32_t QsgdQuantizeScaled(float x, float scale, uint32_t max_code, float u) {
  if (!(scale > 0.0f)) return QsgdZeroScaleCode(max_code);
  return QsgdQuantize(x, QsgdGridFor(scale, max_code), max_code, u);
}

// ------------------------------------------------------------------ sign --
// EF-signSGD: one bit per element, 1 = negative. sign(0) is +1 (both +0
// and -0), and NaN encodes as +1 (its residual is reset). The decoded value
// is ±scale with scale = mean |x| over the bucket's finite elements.
GRADWIRE_HD inline uint32_t SignCode(float x) { return x < 0.0f ? 1u : 0u; }
GRADWIRE_HD inline float SignDecode(uint32_t code, float scale) { return code ? -scale : scale; }

// ------------------------------------------------------------ bit packing --
// Code i (bits wide, 1..8) occupies bits [i*bits, (i+1)*bits) of the byte
// stream, least significant bit first; a code spans at most two bytes.
// Unused high bits of the last byte are zero.
GRADWIRE_HD inline uint64_t PackedBytes(uint64_t n, uint32_t bits) { return (n * bits + 7) / 8; }

GRADWIRE_HD inline uint32_t ReadPackedCode(const uint8_t* p, uint64_t i, uint32_t bits) {
  const uint64_t bit = i * bits;
  const uint64_t byte = bit >> 3;
  const uint32_t off = static_cast<uint32_t>(bit & 7);
  uint32_t w = p[byte];
  if (off + bits > 8) w |= static_cast<uint32_t>(p[byte + 1]) << 8;
  return (w >> off) & ((1u << bits) - 1u);
}

// ORs code i into `p`, which must start zeroed. Not atomic: on the GPU,
// build each output byte in one thread (or use atomicOr on 32-bit words).
GRADWIRE_HD inline void OrPackedCode(uint8_t* p, uint64_t i, uint32_t code, uint32_t bits) {
  const uint64_t bit = i * bits;
  const uint64_t byte = bit >> 3;
  const uint32_t off = static_cast<uint32_t>(bit & 7);
  const uint32_t w = code << off;
  p[byte] = static_cast<uint8_t>(p[byte] | (w & 0xffu));
  if (off + bits > 8) p[byte + 1] = static_cast<uint8_t>(p[byte + 1] | (w >> 8));
}

// Buckets of `bucket_size` elements covering n; the last may be partial.
GRADWIRE_HD inline uint64_t BucketCount(uint64_t n, uint32_t bucket_size) {
  return (n + bucket_size - 1) / bucket_size;
}

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_ELEMENT_MATH_H_
