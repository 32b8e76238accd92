// The index section of a frame: raw u32 or delta-varint indices, encoded
// and decoded with every check a hostile frame needs (docs/wire_format.md,
// "Indices"). Declared in wire_format.h; the frame around it is
// wire_format.cc's. Bytes are decoded with base/coding.h, never through a
// cast of an unaligned pointer.
#include <algorithm>
#include <iterator>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/codec/wire_error.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

using wire_internal::Invalid;

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kU64Max : r;
}

// The error for the malformed varint #ordinal at in[pos] (the fast decoder
// only says "no"; base's DecodeVarint32 says why).
absl::Status VarintError(absl::Span<const uint8_t> in, size_t pos, size_t ordinal) {
  uint32_t ignored = 0;
  absl::Status s =
      DecodeVarint32(in, &pos, &ignored, absl::StrCat("delta-varint indices: varint #", ordinal));
  if (s.ok()) return absl::InternalError("wire frame: varint decoders disagree");
  return Invalid(s.message());
}

// OK if indices[from - 1 ..] is strictly increasing (from >= 1), else
// the error that names the first pair that is not.
absl::Status CheckIncreasing(absl::Span<const uint32_t> indices, size_t from) {
  for (size_t i = from; i < indices.size(); ++i) {
    if (indices[i] <= indices[i - 1]) {
      return Invalid(absl::StrCat("cannot encode indices: #", i, " (", indices[i],
                                  ") does not exceed #", i - 1, " (", indices[i - 1],
                                  "); indices must be strictly increasing"));
    }
  }
  return absl::OkStatus();
}

// Dense selections (top-k at 10 %) have mostly one-byte gaps: when the
// next eight bytes are all one-byte varints, indices out[i, i + 8) (i > 0)
// follow from *prev by eight adds, with one range check for the last
// (the largest). Returns false, having moved nothing (out[i, i + 8) may
// hold junk), when they are not, when fewer than eight indices or bytes
// are left, or when the last is out of range: the caller's varint loop
// then decodes them one by one and names the bad one.
bool DecodeEightOneByteGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                            uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 8 || limit - *p < 8) return false;
  const uint64_t bytes = DecodeFixed64(*p);
  if ((bytes & 0x8080808080808080ull) != 0) return false;
  uint64_t v = *prev;
  uint32_t* o = out.data() + i;
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    v += 1 + ((bytes >> (8 * b)) & 0xff);
    o[b] = static_cast<uint32_t>(v);
  }
  if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  *prev = v;
  *p += 8;
  return true;
}

#if defined(__SSE2__)
// DecodeEightOneByteGaps for sixteen gaps from one 16-byte load, the adds
// done as prefix sums in vector lanes: each gap plus one is at most 128,
// so sixteen of them sum below 2^16 in 16-bit lanes, widened to 32 bits
// and offset by *prev only for the stores. The same result and the same
// false as DecodeEightOneByteGaps (sixteen indices and bytes).
bool DecodeSixteenOneByteGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                              uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 16 || limit - *p < 16) return false;
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(*p));
  if (_mm_movemask_epi8(bytes) != 0) return false;  // a continuation bit
  const __m128i zero = _mm_setzero_si128();
  const __m128i one = _mm_set1_epi16(1);
  __m128i lo = _mm_add_epi16(_mm_unpacklo_epi8(bytes, zero), one);  // gaps 0..7, plus one
  __m128i hi = _mm_add_epi16(_mm_unpackhi_epi8(bytes, zero), one);  // gaps 8..15
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 2));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 2));
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 4));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 4));
  lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 8));
  hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 8));
  const __m128i lo_last = _mm_shufflehi_epi16(lo, 0xff);  // lanes 4..7 = lane 7
  hi = _mm_add_epi16(hi, _mm_unpackhi_epi64(lo_last, lo_last));
  const uint64_t v = *prev + static_cast<uint32_t>(_mm_extract_epi16(hi, 7));
  if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  // *prev + a lane sum <= v < 2^32: the 32-bit adds do not wrap.
  const __m128i base = _mm_set1_epi32(static_cast<int>(static_cast<uint32_t>(*prev)));
  __m128i* o = reinterpret_cast<__m128i*>(out.data() + i);
  _mm_storeu_si128(o, _mm_add_epi32(base, _mm_unpacklo_epi16(lo, zero)));
  _mm_storeu_si128(o + 1, _mm_add_epi32(base, _mm_unpackhi_epi16(lo, zero)));
  _mm_storeu_si128(o + 2, _mm_add_epi32(base, _mm_unpacklo_epi16(hi, zero)));
  _mm_storeu_si128(o + 3, _mm_add_epi32(base, _mm_unpackhi_epi16(hi, zero)));
  *prev = v;
  *p += 16;
  return true;
}

// The encoder's mirror of DecodeSixteenOneByteGaps: when each of
// indices[i, i + 16) (i >= 1) exceeds the one before by 1 to 128, writes
// their sixteen one-byte gaps to out[0, 16) and returns true; otherwise
// returns false having written nothing. One unsigned test covers both
// conditions: a gap minus one of 128 or more, or an index not above the
// one before (the subtraction wraps), leaves a bit above the low seven.
bool EncodeSixteenOneByteGaps(const uint32_t* indices, uint8_t* out) {
  const __m128i one = _mm_set1_epi32(1);
  __m128i gaps[4];
  __m128i wide = _mm_setzero_si128();
  for (int v = 0; v < 4; ++v) {
    const __m128i cur = _mm_loadu_si128(reinterpret_cast<const __m128i*>(indices + 4 * v));
    const __m128i prev = _mm_loadu_si128(reinterpret_cast<const __m128i*>(indices + 4 * v - 1));
    gaps[v] = _mm_sub_epi32(_mm_sub_epi32(cur, prev), one);
    wide = _mm_or_si128(wide, gaps[v]);
  }
  if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_srli_epi32(wide, 7), _mm_setzero_si128())) != 0xffff) {
    return false;
  }
  // Every lane is < 128: the saturating packs keep them as they are.
  const __m128i bytes =
      _mm_packus_epi16(_mm_packs_epi32(gaps[0], gaps[1]), _mm_packs_epi32(gaps[2], gaps[3]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
  return true;
}
#endif

// Four gaps of one or two bytes each (base's minimal forms), the common
// case from about 0.1 to 10 % density, from one 8-byte load: each gap's
// start follows from the continuation bits before it, with no branch on
// the lengths and no load waiting for the last gap's length. False
// (nothing consumed; out[i, i + 4) may hold junk) when fewer than four
// indices or eight bytes are left, when a gap takes three bytes or more or
// is overlong (a second byte of 0), or when the last index is out of
// range: the caller's varint loop then decodes them one by one and names
// the bad one.
bool DecodeFourShortGaps(const uint8_t** p, const uint8_t* limit, uint64_t* prev,
                         uint64_t dense_length, absl::Span<uint32_t> out, size_t i) {
  if (out.size() - i < 4 || limit - *p < 8) return false;
  const uint64_t bytes = DecodeFixed64(*p);
  uint64_t v = *prev;
  uint32_t bad = 0;
  unsigned at = 0;  // the current gap's first bit in `bytes` (at most 48)
  uint32_t* o = out.data() + i;
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const uint32_t w = static_cast<uint32_t>(bytes >> at) & 0xffffu;
    const uint32_t two = (w >> 7) & 1;  // the first byte continues
    bad |= two & ((w >> 15) | ((w >> 8) == 0 ? 1u : 0u));
    v += 1 + ((w & 0x7fu) | ((w >> 1) & 0x3f80u & (0u - two)));
    o[g] = static_cast<uint32_t>(v);
    at += 8 + 8 * two;
  }
  if (bad != 0 || v >= dense_length || v > std::numeric_limits<uint32_t>::max()) return false;
  *prev = v;
  *p += at / 8;
  return true;
}

// Each varint takes at least one byte: refuse early rather than decode a
// section that cannot possibly hold `count` indices.
absl::Status CheckDeltaVarintLength(absl::Span<const uint8_t> in, uint64_t count) {
  if (count > in.size()) {
    return Invalid(absl::StrCat("delta-varint indices: ", in.size(), " bytes cannot hold ", count,
                                " indices"));
  }
  return absl::OkStatus();
}

// One varint of base's strict grammar (minimal, <= 5 bytes, < 2^32) at
// *p into *raw, *p moved past it; false (nothing moved) if there is none.
// A gap of one or two bytes, the common case, without a branch on which:
// at 1 % density about a third of the gaps take two bytes, in no
// pattern, and a branch on the length mispredicted on each of them.
inline bool DecodeOneGap(const uint8_t** p, const uint8_t* limit, uint32_t* raw) {
  const uint8_t* at = *p;
  uint32_t w = 0;
  if (limit - at >= 2) w = at[0] | uint32_t{at[1]} << 8;
  const uint32_t two = (w >> 7) & 1;  // the first byte continues
  // Fewer than two bytes left, a third byte, or a second byte of 0
  // (overlong): base's decoder, which takes the long form or fails.
  if (limit - at >= 2 && (two & ((w >> 15) | ((w >> 8) == 0 ? 1u : 0u))) == 0) {
    *raw = (w & 0x7fu) | ((w >> 1) & 0x3f80u & (0u - two));
    *p = at + 1 + two;
    return true;
  }
  const uint8_t* next = GetVarint32Ptr(at, limit, raw);
  if (next == nullptr) return false;
  *p = next;
  return true;
}

// Whether `in` is a delta-varint section of exactly `count` indices in
// base's strict grammar whose last (largest) index is < dense_length and
// < 2^32: then every index is (they increase). It only sums the gaps,
// sixteen one-byte gaps at a time by one SAD, and keeps nothing: a check
// at several times the speed of a decode (top-k 10 %'s one-byte gaps). On
// false the caller decodes to find and name the fault.
bool ScanDeltaVarint(absl::Span<const uint8_t> in, uint64_t count, uint64_t dense_length) {
  const uint8_t* p = in.data();
  const uint8_t* const limit = in.data() + in.size();
  if (count == 0) return p == limit;
  uint32_t raw = 0;
  p = GetVarint32Ptr(p, limit, &raw);
  if (p == nullptr) return false;
  uint64_t last = raw;  // the running index
  uint64_t left = count - 1;
  constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
  while (left > 0) {
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    __m128i sums = zero;  // two u64 lanes of byte sums
    const uint64_t before = left;
    while (left >= 16 && limit - p >= 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      if (_mm_movemask_epi8(bytes) != 0) break;  // a continuation bit
      sums = _mm_add_epi64(sums, _mm_sad_epu8(bytes, zero));
      p += 16;
      left -= 16;
    }
    last += static_cast<uint64_t>(_mm_cvtsi128_si64(sums)) +
            static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums))) +
            (before - left);
    if (last > kU32Max) return false;
#endif
    // A few gaps one by one (a two-byte gap, say) before sixteen are
    // tried again.
    for (int g = 0; g < 8 && left > 0; ++g, --left) {
      if (!DecodeOneGap(&p, limit, &raw)) return false;
      last += uint64_t{raw} + 1;
      if (last > kU32Max) return false;
    }
  }
  return p == limit && last < dense_length;
}

}  // namespace

uint64_t MaxIndexBytes(IndexEncoding encoding, uint64_t count) {
  switch (encoding) {
    case IndexEncoding::kNone:
      return 0;
    case IndexEncoding::kRawU32:
      return SaturatingMul(count, 4);
    case IndexEncoding::kDeltaVarint:
      return SaturatingMul(count, kMaxVarint32Bytes);
  }
  return 0;
}

absl::StatusOr<size_t> EncodeIndices(IndexEncoding encoding, absl::Span<const uint32_t> indices,
                                     absl::Span<uint8_t> out) {
  // Delta-varint checks as it encodes (one pass over the indices), and
  // the whole list before it reports a full output, so that each encoding
  // refuses a list that is not increasing first.
  if (encoding != IndexEncoding::kDeltaVarint) {
    if (absl::Status s = CheckIncreasing(indices, 1); !s.ok()) return s;
  }
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!indices.empty()) {
        return Invalid(
            absl::StrCat("cannot encode ", indices.size(), " indices with index_encoding none"));
      }
      return size_t{0};
    case IndexEncoding::kRawU32: {
      if (out.size() / 4 < indices.size()) {
        return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                    indices.size(), " raw u32 indices"));
      }
      for (size_t i = 0; i < indices.size(); ++i) EncodeFixed32(out.data() + 4 * i, indices[i]);
      return indices.size() * 4;
    }
    case IndexEncoding::kDeltaVarint: {
      size_t pos = 0;
      // One-byte gaps in a row: sixteen more are tried at once only after
      // sixteen, so that a sparser list (1 %, a fifth of its gaps two
      // bytes long) rarely pays a failed try.
      size_t run = 0;
      for (size_t i = 0; i < indices.size(); ++i) {
#if defined(__SSE2__)
        if (run >= 16 && indices.size() - i >= 16 && out.size() - pos >= 16) {
          if (EncodeSixteenOneByteGaps(indices.data() + i, out.data() + pos)) {
            pos += 16;
            i += 15;
            continue;
          }
          run = 0;
        }
#endif
        if (i > 0 && indices[i] <= indices[i - 1]) return CheckIncreasing(indices, i);
        const uint32_t v = i == 0 ? indices[0] : indices[i] - indices[i - 1] - 1;
        // One byte or two, without a branch on which: at 1 % density about
        // a quarter of the gaps take two bytes, in no pattern, and a
        // branch on the length mispredicted on each (255K indices at 1 %
        // on an Intel VM: 3.6-4.2 ns an index with it, 2.0-2.1 without).
        // Both bytes are stored; the second is overwritten by the next
        // index when the first was all.
        if (v < 0x4000 && out.size() - pos >= 2) {
          const uint32_t two = v >= 0x80 ? 1 : 0;
          out[pos] = static_cast<uint8_t>((v & 0x7fu) | (two << 7));
          out[pos + 1] = static_cast<uint8_t>(v >> 7);
          pos += 1 + two;
          run = (run + (i > 0 ? 1 : 0)) & (size_t{two} - 1);  // 0 after a two-byte gap
          continue;
        }
        run = 0;
        // Through a copy: pos itself, its address taken, would live in
        // memory, a store and a load on every index's path.
        size_t at = pos;
        const bool fits = EncodeVarint32(out, &at, v);
        pos = at;
        if (!fits) {
          if (absl::Status s = CheckIncreasing(indices, i + 1); !s.ok()) return s;
          return Invalid(absl::StrCat("output of ", out.size(), " bytes too small for ",
                                      indices.size(), " delta-varint indices (full at #", i,
                                      "); size it with MaxIndexBytes"));
        }
      }
      return pos;
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", static_cast<int>(encoding)));
}

absl::Status DecodeIndices(IndexEncoding encoding, absl::Span<const uint8_t> in,
                           uint64_t dense_length, absl::Span<uint32_t> out) {
  switch (encoding) {
    case IndexEncoding::kNone:
      if (!in.empty() || !out.empty()) {
        return Invalid(absl::StrCat("index_encoding none carries no indices, but got ", in.size(),
                                    " bytes for ", out.size(), " indices"));
      }
      return absl::OkStatus();
    case IndexEncoding::kRawU32: {
      if (in.size() % 4 != 0 || in.size() / 4 != out.size()) {
        return Invalid(absl::StrCat("raw u32 indices: ", in.size(), " bytes for ", out.size(),
                                    " indices (need exactly ", SaturatingMul(out.size(), 4), ")"));
      }
      for (size_t i = 0; i < out.size(); ++i) {
        const uint32_t v = DecodeFixed32(in.data() + 4 * i);
        if (v >= dense_length) {
          return Invalid(absl::StrCat("raw u32 indices: index #", i, " = ", v,
                                      " is not below dense_length ", dense_length));
        }
        if (i > 0 && v <= out[i - 1]) {
          return Invalid(absl::StrCat("raw u32 indices: index #", i, " = ", v,
                                      " does not exceed index #", i - 1, " = ", out[i - 1],
                                      " (must be strictly increasing)"));
        }
        out[i] = v;
      }
      return absl::OkStatus();
    }
    case IndexEncoding::kDeltaVarint: {
      GRADWIRE_RETURN_IF_ERROR(CheckDeltaVarintLength(in, out.size()));
      DeltaVarintReader reader(in, out.size(), dense_length);
      GRADWIRE_RETURN_IF_ERROR(reader.Read(out));
      return reader.Finish();
    }
  }
  return Invalid(absl::StrCat("unknown index_encoding ", static_cast<int>(encoding)));
}

absl::Status CheckDeltaVarintIndices(absl::Span<const uint8_t> in, uint64_t count,
                                     uint64_t dense_length) {
  GRADWIRE_RETURN_IF_ERROR(CheckDeltaVarintLength(in, count));
  if (ScanDeltaVarint(in, count, dense_length)) return absl::OkStatus();
  // Not valid: a decode, a piece at a time, names the fault.
  uint32_t piece[256];
  DeltaVarintReader reader(in, count, dense_length);
  while (reader.remaining() > 0) {
    const uint64_t len = std::min<uint64_t>(std::size(piece), reader.remaining());
    GRADWIRE_RETURN_IF_ERROR(reader.Read(absl::MakeSpan(piece, static_cast<size_t>(len))));
  }
  GRADWIRE_RETURN_IF_ERROR(reader.Finish());
  return absl::InternalError("delta-varint indices: the scan refused a section the decoder took");
}

DeltaVarintReader::DeltaVarintReader(absl::Span<const uint8_t> in, uint64_t count,
                                     uint64_t dense_length)
    : begin_(in.data()),
      p_(in.data()),
      limit_(in.data() + in.size()),
      count_(count),
      dense_length_(dense_length) {}

absl::Status DeltaVarintReader::Read(absl::Span<uint32_t> out) {
  if (out.size() > remaining()) {
    return absl::InternalError(absl::StrCat("delta-varint indices: asked for ", out.size(),
                                            " more of ", count_, " with ", remaining(), " left"));
  }
  const uint8_t* p = p_;
  const uint8_t* const limit = limit_;
  const uint8_t* const begin = begin_;
  uint64_t prev = prev_;
  const uint64_t first = read_;  // the ordinal of out[0] in the section
  const uint64_t dense_length = dense_length_;
  [[maybe_unused]] bool dense_run = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const bool follows = first + i > 0;  // an index before this one: prev holds it
#if defined(__SSE2__)
    // Sixteen at a time while the gaps run dense; after a miss, again
    // once eight have been: a sparser list (1 %, a third of its gaps two
    // bytes long) would otherwise pay a mispredicted try per index.
    if (follows && dense_run) {
      if (DecodeSixteenOneByteGaps(&p, limit, &prev, dense_length, out, i)) {
        i += 15;
        continue;
      }
      dense_run = false;
    }
#endif
    if (follows && DecodeEightOneByteGaps(&p, limit, &prev, dense_length, out, i)) {
      dense_run = true;
      i += 7;
      continue;
    }
    if (follows && DecodeFourShortGaps(&p, limit, &prev, dense_length, out, i)) {
      i += 3;
      continue;
    }
    uint32_t raw = 0;
    if (!DecodeOneGap(&p, limit, &raw)) {
      return VarintError(absl::MakeConstSpan(begin, limit), static_cast<size_t>(p - begin),
                         first + i);
    }
    // Gaps are stored minus one, so strictly increasing holds by
    // construction; the u64 sum cannot wrap (< 2^33).
    const uint64_t v = follows ? prev + 1 + raw : raw;
    if (v >= dense_length || v > std::numeric_limits<uint32_t>::max()) {
      return Invalid(absl::StrCat(
          "delta-varint indices: index #", first + i, " = ", v, " is not below dense_length ",
          dense_length, v > std::numeric_limits<uint32_t>::max() ? " (and exceeds u32)" : ""));
    }
    out[i] = static_cast<uint32_t>(v);
    prev = v;
  }
  p_ = p;
  prev_ = prev;
  read_ += out.size();
  return absl::OkStatus();
}

absl::Status DeltaVarintReader::Finish() const {
  if (remaining() != 0) {
    return absl::InternalError(absl::StrCat("delta-varint indices: finished with ", remaining(),
                                            " of ", count_, " unread"));
  }
  if (p_ != limit_) {
    return Invalid(absl::StrCat("delta-varint indices: ", limit_ - p_, " trailing bytes after ",
                                count_, " indices (section of ", limit_ - begin_, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace gradwire
