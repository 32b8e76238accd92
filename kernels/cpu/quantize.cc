#include "gradwire/kernels/cpu/quantize.h"

#include <string.h>

#include "gradwire/kernels/cpu/clones_x86.h"
#include "gradwire/kernels/cpu/element_hash_x86.h"
#include "gradwire/kernels/cpu/qsgd_levels.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Elements coded per step: their hashes, codes and packed bytes are staged
// on the stack, so each element loop runs straight through (and
// vectorizes) and bits are packed eight codes at a time.
constexpr uint64_t kBlock = 512;

// Eight codes of `bits` (1..8) bits, one per byte of w (little endian),
// packed into the low 8 * bits bits: pairs, then quads, then the halves.
GRADWIRE_CPU_INLINE uint64_t Compact(uint64_t w, uint32_t bits) {
  w = (w & 0x00ff00ff00ff00ffull) | ((w & 0xff00ff00ff00ff00ull) >> (8 - bits));
  w = (w & 0x0000ffff0000ffffull) | ((w & 0xffff0000ffff0000ull) >> (16 - 2 * bits));
  return (w & 0xffffffffull) | ((w >> 32) << (4 * bits));
}

// Compact's inverse: the low 8 * bits bits of w as eight codes, one a byte.
GRADWIRE_CPU_INLINE uint64_t Expand(uint64_t w, uint32_t bits) {
  const uint64_t m4 = (uint64_t{1} << (4 * bits)) - 1;
  w = (w & m4) | (((w >> (4 * bits)) & m4) << 32);
  const uint64_t m2 = ((uint64_t{1} << (2 * bits)) - 1) * 0x0000000100000001ull;
  w = (w & m2) | (((w >> (2 * bits)) & m2) << 16);
  const uint64_t m1 = ((uint64_t{1} << bits) - 1) * 0x0001000100010001ull;
  return (w & m1) | (((w >> bits) & m1) << 8);
}

// Packing when codes do not cross bytes (bits 1, 2, 4): byte j holds the
// 8/bits codes from 8/bits * j on, lowest first. Each byte is gathered
// from, or spread to, its codes (one a byte, little endian) with shifts
// and masks on one word, in loops over bytes that vectorize.
template <uint32_t kBits>
GRADWIRE_CPU_INLINE void PackBytes(const uint8_t* codes, uint64_t bytes, uint8_t* out) {
  for (uint64_t j = 0; j < bytes; ++j) {
    uint64_t b;
    if (kBits == 4) {
      const uint32_t x = LoadLe<uint16_t>(codes + 2 * j);
      b = x | x >> 4;
    } else if (kBits == 2) {
      const uint32_t x = LoadLe<uint32_t>(codes + 4 * j);
      b = x | x >> 6 | x >> 12 | x >> 18;
    } else {
      // b_e at bit 56 + e of the product, the rest below bit 56 (no carries)
      // or above bit 63.
      b = (LoadLe<uint64_t>(codes + 8 * j) * 0x0102040810204080ull) >> 56;
    }
    out[j] = static_cast<uint8_t>(b);
  }
}

template <uint32_t kBits>
GRADWIRE_CPU_INLINE void UnpackBytes(const uint8_t* in, uint64_t bytes, uint8_t* codes) {
  for (uint64_t j = 0; j < bytes; ++j) {
    const uint64_t b = in[j];
    if (kBits == 4) {
      StoreLe<uint16_t>(codes + 2 * j, static_cast<uint16_t>((b | b << 4) & 0x0f0f));
    } else if (kBits == 2) {
      StoreLe<uint32_t>(codes + 4 * j,
                        static_cast<uint32_t>((b | b << 6 | b << 12 | b << 18) & 0x03030303));
    } else {
      uint64_t x = (b | b << 28) & 0x0000000f0000000full;
      x = (x | x << 14) & 0x0003000300030003ull;
      StoreLe<uint64_t>(codes + 8 * j, (x | x << 7) & 0x0101010101010101ull);
    }
  }
}

// Appends codes (one a byte) to the packed stream, eight at a time; the
// bytes come out in order and the last one's unused bits are zero, so the
// output needs no zeroing pass. (Its members are inlined into each clone.)
class CodePacker {
 public:
  CodePacker(uint8_t* out, uint32_t bits) : out_(out), bits_(bits) {}

  // Where the next count <= kBlock codes go; then call Commit(count).
  GRADWIRE_CPU_INLINE uint8_t* Slots() { return codes_ + pending_; }

  GRADWIRE_CPU_INLINE void Commit(uint64_t count) {
    pending_ += count;
    const uint64_t groups = pending_ / 8;
    Pack(groups);
    pending_ -= 8 * groups;
    memmove(codes_, codes_ + 8 * groups, pending_);
  }

  GRADWIRE_CPU_INLINE void Finish() {
    if (pending_ == 0) return;
    memset(codes_ + pending_, 0, 8 - pending_);
    uint8_t word[8];
    StoreLe<uint64_t>(word, Compact(LoadLe<uint64_t>(codes_), bits_));
    memcpy(out_, word, (pending_ * bits_ + 7) / 8);
    pending_ = 0;
  }

 private:
  GRADWIRE_CPU_INLINE void Pack(uint64_t groups) {
    switch (bits_) {
      case 1:
        PackBytes<1>(codes_, groups, out_);
        break;
      case 2:
        PackBytes<2>(codes_, 2 * groups, out_);
        break;
      case 4:
        PackBytes<4>(codes_, 4 * groups, out_);
        break;
      case 8:
        memcpy(out_, codes_, 8 * groups);
        break;
      default: {
        // A word per group, stored 8 bytes at a time of which `bits` are
        // kept (the next group's store overwrites the rest): staged, then
        // what is kept copied out.
        for (uint64_t g = 0; g < groups; ++g) {
          StoreLe<uint64_t>(packed_ + g * bits_, Compact(LoadLe<uint64_t>(codes_ + 8 * g), bits_));
        }
        memcpy(out_, packed_, groups * bits_);
      }
    }
    out_ += groups * bits_;
  }

  uint8_t* out_;
  const uint32_t bits_;
  uint64_t pending_ = 0;  // codes waiting for a full group, < 8
  uint8_t codes_[kBlock + 8];
  uint8_t packed_[kBlock + 8];
};

// Reads the packed stream back as codes, one a byte, in order.
class CodeUnpacker {
 public:
  CodeUnpacker(const uint8_t* in, uint64_t n, uint32_t bits)
      : in_(in), end_(in + PackedBytes(n, bits)), bits_(bits) {}

  // The next count <= kBlock codes (the stream must hold them).
  GRADWIRE_CPU_INLINE const uint8_t* Next(uint64_t count) {
    memmove(codes_, codes_ + taken_, ready_ - taken_);
    ready_ -= taken_;
    taken_ = count;
    const uint64_t groups = count > ready_ ? (count - ready_ + 7) / 8 : 0;
    // Groups wholly inside the stream, then at most one cut short.
    const uint64_t left = static_cast<uint64_t>(end_ - in_) / bits_;
    const uint64_t whole = groups < left ? groups : left;
    uint8_t* codes = codes_ + ready_;
    switch (bits_) {
      case 1:
        UnpackBytes<1>(in_, whole, codes);
        break;
      case 2:
        UnpackBytes<2>(in_, 2 * whole, codes);
        break;
      case 4:
        UnpackBytes<4>(in_, 4 * whole, codes);
        break;
      case 8:
        memcpy(codes, in_, 8 * whole);
        break;
      default:
        for (uint64_t g = 0; g < whole; ++g) {
          StoreLe<uint64_t>(codes + 8 * g, Expand(LoadGroup(in_ + g * bits_), bits_));
        }
    }
    in_ += whole * bits_;
    if (whole < groups) {
      StoreLe<uint64_t>(codes + 8 * whole, Expand(LoadGroup(in_), bits_));
      in_ = end_;
    }
    ready_ += 8 * groups;
    return codes_;
  }

 private:
  // The group's bytes at p (fewer at the end of the stream), little endian.
  GRADWIRE_CPU_INLINE uint64_t LoadGroup(const uint8_t* p) const {
    if (end_ - p >= 8) return LoadLe<uint64_t>(p) & Mask();
    uint8_t word[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint64_t left = static_cast<uint64_t>(end_ - p);
    memcpy(word, p, left < bits_ ? left : bits_);
    return LoadLe<uint64_t>(word);
  }
  GRADWIRE_CPU_INLINE uint64_t Mask() const {
    return bits_ == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bits_)) - 1;
  }

  const uint8_t* in_;
  const uint8_t* end_;
  const uint32_t bits_;
  uint64_t ready_ = 0;  // codes unpacked into codes_
  uint64_t taken_ = 0;  // of which handed out by the last Next
  uint8_t codes_[kBlock + 16];
};

// Makes acc = grad + residual for one bucket, stored in the residual (or
// just grad without one); returns where acc lives.
GRADWIRE_CPU_INLINE const float* AccumulateBucket(const float* grad, float* residual,
                                                  uint64_t len) {
  if (residual == nullptr) return grad;
  for (uint64_t i = 0; i < len; ++i) residual[i] = grad[i] + residual[i];
  return residual;
}

// QSGD's scale: the largest finite |acc| (as bits: for floats >= +0 the
// integer order is the numeric order). Counts the non-finite.
GRADWIRE_CPU_INLINE float MaxFiniteMagnitude(const float* acc, uint64_t len, uint64_t* nonfinite) {
  uint32_t max = 0, bad = 0;
  for (uint64_t i = 0; i < len; ++i) {
    const uint32_t m = FloatBits(acc[i]) & 0x7fffffffu;
    const bool finite = m < 0x7f800000u;
    bad += finite ? 0u : 1u;
    const uint32_t v = SelectBits(finite, m, 0);
    max = v > max ? v : max;
  }
  *nonfinite += bad;
  return BitsFloat(max);
}

// One element of QsgdBlock: its code (QsgdQuantize, branch-free) and, if
// res is not null, its residual; `hash` is ElementHash of its index.
GRADWIRE_CPU_INLINE uint32_t QsgdElement(float a, uint32_t hash, float scale, float top, float half,
                                         const QsgdLevelCoefficients& levels, int32_t m,
                                         float* res) {
  // UnitFloat: the hash's top 24 bits, exact as an int32 too.
  const float u = static_cast<float>(static_cast<int32_t>(hash >> 8)) * 5.9604644775390625e-8f;
  // The position on the level grid, clamped to [0, M]: NaN and t <= 0
  // give code 0, t >= M gives M (its frac is 0).
  float t = MulRn(a / scale + 1.0f, half);
  t = t > 0.0f ? t : 0.0f;
  t = t < top ? t : top;
  const int32_t lo = static_cast<int32_t>(t);
  const float frac = t - static_cast<float>(lo);
  const uint32_t code = static_cast<uint32_t>(lo) + (u < frac ? 1u : 0u);
  // QsgdDequantize without a lookup or a division (qsgd_levels.h).
  const float level = QsgdLevelOf(static_cast<int32_t>(2 * code) - m, levels);
  if (res != nullptr) *res = ResidualAfter(a, MulRn(level, scale));
  return code;
}

// Codes and residuals of count <= kBlock elements of one QSGD bucket
// whose scale is > 0, the first at global index `first`; `rounding` is
// the stream key of RoundingKey.
template <bool kHasResidual>
GRADWIRE_CPU_INLINE void QsgdBlock(const float* acc, float* res, uint64_t count, uint64_t first,
                                   uint64_t rounding, float scale, uint32_t max_code,
                                   uint8_t* codes) {
  uint32_t hash[kBlock];
  HashRun<true>(MakeElementKey(rounding, 32), first, count, hash);
  const float top = static_cast<float>(max_code);
  const float half = 0.5f * top;
  const int32_t m = static_cast<int32_t>(max_code);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  for (uint64_t i = 0; i < count; ++i) {
    codes[i] = static_cast<uint8_t>(QsgdElement(acc[i], hash[i], scale, top, half, levels, m,
                                                kHasResidual ? res + i : nullptr));
  }
}

#if GRADWIRE_CPU_V3_FUNCTIONS
// HashRound8<true, false> with AVX2 intrinsics.
GRADWIRE_CPU_V3 inline __m256i HashRoundV3(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int32_t>(kHashMul1)));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int32_t>(kHashMul2)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// QsgdBlock with AVX2 intrinsics, 32 elements a step, the hashes formed in
// registers; decoded values from the bucket's table (bits <= 4) or
// QsgdLevelOf, the same bits as QsgdElement. `res` may be null.
GRADWIRE_CPU_V3 void QsgdBlockV3(const float* acc, float* res, uint64_t count, uint64_t first,
                                 uint64_t rounding, float scale, uint32_t bits, uint8_t* codes) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const ElementKey key = MakeElementKey(rounding, 32);
  const float top = static_cast<float>(max_code);
  const float half = 0.5f * top;
  const int32_t m = static_cast<int32_t>(max_code);
  const QsgdLevelCoefficients levels = QsgdLevelsFor(max_code);
  alignas(32) float table[16];
  QsgdDecodedTable(bits <= 4 ? bits : 4, scale, table);
  const __m256 table_lo = _mm256_load_ps(table), table_hi = _mm256_load_ps(table + 8);
  const __m256 s = _mm256_set1_ps(scale), one = _mm256_set1_ps(1.0f);
  const __m256 half8 = _mm256_set1_ps(half), top8 = _mm256_set1_ps(top);
  const __m256 zero = _mm256_setzero_ps(), unit = _mm256_set1_ps(5.9604644775390625e-8f);
  const __m256 hi = _mm256_set1_ps(levels.hi), lo = _mm256_set1_ps(levels.lo);
  const __m256i exponent = _mm256_set1_epi32(0x7f800000), mix = _mm256_set1_epi32(key.mix);
  const __m256i minus_m = _mm256_set1_epi32(-m);
  __m256i x = _mm256_add_epi32(
      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
      _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first) + key.add)));
  uint64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    __m256i c[4];
    for (int q = 0; q < 4; ++q) {
      const __m256 a = _mm256_loadu_ps(acc + i + 8 * q);
      __m256 t = _mm256_mul_ps(_mm256_add_ps(_mm256_div_ps(a, s), one), half8);
      t = _mm256_max_ps(t, zero);  // t > 0 ? t : +0 (NaN gives +0)
      t = _mm256_min_ps(t, top8);  // t < top ? t : top
      const __m256i floor = _mm256_cvttps_epi32(t);
      const __m256 frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(floor));
      __m256i h = HashRoundV3(x);
      h = HashRoundV3(_mm256_xor_si256(h, mix));
      x = _mm256_add_epi32(x, _mm256_set1_epi32(8));
      const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
      const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(u, frac, _CMP_LT_OQ));
      const __m256i code = _mm256_sub_epi32(floor, up);
      c[q] = code;
      if (res == nullptr) continue;
      __m256 decoded;
      if (bits <= 3) {
        decoded = _mm256_permutevar8x32_ps(table_lo, code);
      } else if (bits == 4) {
        decoded = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table_lo, code),
                                   _mm256_permutevar8x32_ps(table_hi, code),
                                   _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));
      } else {
        const __m256 k =
            _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(code, code), minus_m));
        decoded = _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(k, hi), _mm256_mul_ps(k, lo)), s);
      }
      const __m256i r = _mm256_castps_si256(_mm256_sub_ps(a, decoded));
      const __m256i bad = _mm256_cmpeq_epi32(_mm256_and_si256(r, exponent), exponent);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(res + i + 8 * q), _mm256_andnot_si256(bad, r));
    }
    // Codes 0..255 to bytes: the packs interleave 128-bit halves, the
    // permute puts the four-byte groups back in order.
    const __m256i bytes =
        _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(codes + i),
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i < count; ++i) {
    codes[i] =
        static_cast<uint8_t>(QsgdElement(acc[i], ElementHash(key, first + i), scale, top, half,
                                         levels, m, res == nullptr ? nullptr : res + i));
  }
}
#endif

// A bucket with nothing finite and nonzero: QsgdQuantize's middle code,
// which decodes to +0.
GRADWIRE_CPU_INLINE void ZeroScaleBlock(const float* acc, float* res, uint64_t count,
                                        uint32_t max_code, uint8_t* codes) {
  memset(codes, static_cast<int>((max_code + 1) / 2), count);
  if (res == nullptr) return;
  for (uint64_t i = 0; i < count; ++i) res[i] = ResidualAfter(acc[i], 0.0f);
}

template <bool kHasResidual>
GRADWIRE_CPU_INLINE uint64_t QuantizeLoop(const float* grad, float* residual, uint64_t n,
                                          uint32_t bits, uint32_t bucket_size, uint64_t rounding,
                                          uint8_t* scales, uint8_t* packed, bool v3) {
  const uint32_t max_code = QsgdMaxCode(bits);
  CodePacker packer(packed, bits);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = kHasResidual ? residual + start : nullptr;
    if (start + kPrefetchAhead < n) {
      const uint64_t end = n - start - kPrefetchAhead < len ? n : start + kPrefetchAhead + len;
      PrefetchRange(grad, start + kPrefetchAhead, end);
      if (kHasResidual) PrefetchRange(residual, start + kPrefetchAhead, end);
    }
    const float* acc = AccumulateBucket(grad + start, res, len);
    const float scale = MaxFiniteMagnitude(acc, len, &nonfinite);
    StoreLe<uint32_t>(scales + 4 * bucket, FloatBits(scale));
    for (uint64_t at = 0; at < len; at += kBlock) {
      const uint64_t count = len - at < kBlock ? len - at : kBlock;
      float* r = kHasResidual ? res + at : nullptr;
      if (scale > 0.0f) {
#if GRADWIRE_CPU_V3_FUNCTIONS
        if (v3) {
          QsgdBlockV3(acc + at, r, count, start + at, rounding, scale, bits, packer.Slots());
          packer.Commit(count);
          continue;
        }
#else
        (void)v3;
#endif
        QsgdBlock<kHasResidual>(acc + at, r, count, start + at, rounding, scale, max_code,
                                packer.Slots());
      } else {
        ZeroScaleBlock(acc + at, r, count, max_code, packer.Slots());
      }
      packer.Commit(count);
    }
  }
  packer.Finish();
  return nonfinite;
}

GRADWIRE_CPU_CLONES uint64_t QsgdLoop(const float* grad, float* residual, uint64_t n, uint32_t bits,
                                      uint32_t bucket_size, uint64_t rounding, uint8_t* scales,
                                      uint8_t* packed, bool v3) {
  return residual != nullptr ? QuantizeLoop<true>(grad, residual, n, bits, bucket_size, rounding,
                                                  scales, packed, v3)
                             : QuantizeLoop<false>(grad, residual, n, bits, bucket_size, rounding,
                                                   scales, packed, v3);
}

// d[i] += QsgdDequantize(codes[i], scale, m) for i < count; the level as
// QsgdBlock computes it.
GRADWIRE_CPU_INLINE void DequantizeAdd(const uint8_t* codes, uint64_t count, float scale, int32_t m,
                                       const QsgdLevelCoefficients& levels, float* d) {
  for (uint64_t i = 0; i < count; ++i) {
    d[i] += MulRn(QsgdLevelOf(static_cast<int32_t>(2 * codes[i]) - m, levels), scale);
  }
}

// dense[i] += the decoded value of every QSGD code, bucket by bucket.
// 8-bit codes are bytes already and are read in place; other widths are
// unpacked a block at a time.
GRADWIRE_CPU_CLONES void QsgdDecodeLoop(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                        uint32_t bits, uint32_t bucket_size, float* dense) {
  const int32_t m = static_cast<int32_t>(QsgdMaxCode(bits));
  const QsgdLevelCoefficients levels = QsgdLevelsFor(QsgdMaxCode(bits));
  CodeUnpacker unpacker(packed, n, bits);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float scale = BitsFloat(LoadLe<uint32_t>(scales + 4 * bucket));
    if (bits == 8) {
      DequantizeAdd(packed + start, len, scale, m, levels, dense + start);
      continue;
    }
    for (uint64_t at = 0; at < len; at += kBlock) {
      const uint64_t count = len - at < kBlock ? len - at : kBlock;
      DequantizeAdd(unpacker.Next(count), count, scale, m, levels, dense + start + at);
    }
  }
}

// QsgdDecodeLoop for 1, 2 or 4 bits and buckets of a multiple of 8
// elements: each bucket's at most 16 decoded values are tabulated (the
// same products), and eight codes at a time are cut from one word of the
// stream by per-lane shifts and looked up in two vectors by a permute.
GRADWIRE_CPU_CLONES void QsgdDecodeTable(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                                         uint32_t bits, uint32_t bucket_size, float* dense) {
  const U32x8 shift = U32x8{0, 1, 2, 3, 4, 5, 6, 7} * bits;
  const uint32_t mask = (1u << bits) - 1;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float scale = BitsFloat(LoadLe<uint32_t>(scales + 4 * bucket));
    float table[16];
    QsgdDecodedTable(bits, scale, table);
    F32x8 low, high;
    memcpy(&low, table, sizeof low);
    memcpy(&high, table + 8, sizeof high);
    const uint8_t* p = packed + start * bits / 8;  // a whole byte: start % 8 == 0
    float* d = dense + start;
    uint64_t i = 0;
    for (; i + 8 <= len; i += 8, p += bits) {
      // Eight codes: `bits` bytes.
      const uint32_t word = bits == 4   ? LoadLe<uint32_t>(p)
                            : bits == 2 ? LoadLe<uint16_t>(p)
                                        : p[0];
      const I32x8 code = (I32x8)(((U32x8{} + word) >> shift) & mask);
      F32x8 v;
      memcpy(&v, d + i, sizeof v);
      v += __builtin_shuffle(low, high, code);
      memcpy(d + i, &v, sizeof v);
    }
    for (; i < len; ++i) {
      const uint32_t q = ReadPackedCode(packed, start + i, bits);
      d[i] += table[q];
    }
  }
}

}  // namespace

void QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                  uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                  uint8_t* packed, FusedStats* stats) {
#if GRADWIRE_CPU_V3_FUNCTIONS
  const bool v3 = CpuIsX86V3();
#else
  const bool v3 = false;
#endif
  const uint64_t nonfinite = QsgdLoop(grad, residual, n, bits, bucket_size,
                                      StreamKey(seed, step, kStreamRounding), scales, packed, v3);
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, float* dense) {
  if ((bits == 1 || bits == 2 || bits == 4) && bucket_size % 8 == 0) {
    QsgdDecodeTable(scales, packed, n, bits, bucket_size, dense);
  } else {
    QsgdDecodeLoop(scales, packed, n, bits, bucket_size, dense);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
