#include "gradwire/kernels/cpu/varint_average.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "gradwire/kernels/cpu/divide_x86.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Elements a slice: its buffer (4 KiB) stays in L1 with the payloads'
// lines, and dense's stores alternate with the frames' reads in short
// bursts (sparse_sum.cc's kStreamSlice). 4096 was no faster on the Zen 3
// guest (three alternated rounds, within its noise).
constexpr uint64_t kSlice = 1024;

// Where one payload stands: the index of the entry to add next (`next`,
// when `left` > 0), the bytes after its varint and its value.
struct Cursor {
  const uint8_t* p = nullptr;
  const uint8_t* limit = nullptr;
  const uint8_t* values = nullptr;
  uint64_t left = 0;
  uint64_t next = 0;
};

// The LEB128 varint of at most five bytes (32 bits) at [p, limit) into
// *v; nullptr if it is truncated or longer. (The caller checked every
// section; this only keeps a bad one inside its bytes.)
const uint8_t* GetVarint(const uint8_t* p, const uint8_t* limit, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 35 && p < limit; shift += 7) {
    const uint64_t b = *p++;
    result |= (b & 0x7f) << shift;
    if (b < 0x80) {
      *v = result;
      return p;
    }
  }
  return nullptr;
}

// Adds c's entries below `end` into acc (which holds dense[s0, ...)) and
// leaves c at its first entry at or past `end` (an index at or past n, in
// a section the caller should not have passed, is never below an end).
template <ValueFormat kFormat, bool kTouched>
void AddBelow(Cursor& c, uint64_t s0, uint64_t end, float* acc, uint64_t* touched) {
  if (c.left == 0 || c.next >= end) return;
  constexpr uint64_t kWidth = kFormat == ValueFormat::kFp32 ? 4 : 2;
  uint64_t idx = c.next, left = c.left;
  const uint8_t* p = c.p;
  const uint8_t* v = c.values;
  const uint8_t* const limit = c.limit;
  auto add = [&](uint64_t i, const uint8_t* value) {
    const uint64_t local = i - s0;
    acc[local] += LoadValue(value, 0, kFormat);
    if (kTouched) touched[local >> 6] |= uint64_t{1} << (local & 63);
  };
  for (;;) {
    add(idx, v);
    v += kWidth;
    if (--left == 0) break;
    // The next eight entries at once when their gaps are one byte each and
    // the last of them is still below `end` (dense selections: most are).
    if (left >= 8 && limit - p >= 8) {
      static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "byte b is bits [8b, 8b + 8)");
      uint64_t bytes;
      std::memcpy(&bytes, p, 8);
      if ((bytes & 0x8080808080808080ull) == 0) {
        // The bytes' sum: pairs into 16-bit lanes (each <= 254), then
        // the four lanes (<= 1016).
        constexpr uint64_t kLowBytes = 0x00ff00ff00ff00ffull;
        const uint64_t pairs = (bytes & kLowBytes) + ((bytes >> 8) & kLowBytes);
        const uint64_t last = idx + 8 + ((pairs * 0x0001000100010001ull) >> 48);
        if (last < end) {
#pragma GCC unroll 8
          for (int b = 0; b < 8; ++b) {
            idx += 1 + ((bytes >> (8 * b)) & 0xff);
            add(idx, v + b * kWidth);
          }
          p += 8;
          v += 8 * kWidth;
          left -= 8;
          if (left == 0) break;
        }
      }
    }
    uint64_t gap;
    if (p < limit && *p < 0x80) {
      gap = *p++;
    } else if ((p = GetVarint(p, limit, &gap)) == nullptr) {
      left = 0;
      break;
    }
    idx += gap + 1;
    if (idx >= end) break;
  }
  c.p = p;
  c.values = v;
  c.left = left;
  c.next = idx;
}

template <bool kTouched>
void AddSlice(Cursor& c, ValueFormat format, uint64_t s0, uint64_t end, float* acc,
              uint64_t* touched) {
  switch (format) {
    case ValueFormat::kFp32:
      return AddBelow<ValueFormat::kFp32, kTouched>(c, s0, end, acc, touched);
    case ValueFormat::kFp16:
      return AddBelow<ValueFormat::kFp16, kTouched>(c, s0, end, acc, touched);
    case ValueFormat::kBf16:
      return AddBelow<ValueFormat::kBf16, kTouched>(c, s0, end, acc, touched);
  }
}

}  // namespace

void DeltaVarintAverage(absl::Span<const DeltaVarintPayload> payloads, float divisor,
                        absl::Span<float> dense, OutStores stores) {
  const uint64_t n = dense.size();
  float* const out = dense.data();
  absl::InlinedVector<Cursor, 16> cursors(payloads.size());
  for (size_t r = 0; r < payloads.size(); ++r) {
    const DeltaVarintPayload& pl = payloads[r];
    Cursor& c = cursors[r];
    c.limit = pl.index_bytes + pl.index_byte_count;
    c.values = pl.values;
    if (pl.count == 0) continue;
    c.p = GetVarint(pl.index_bytes, c.limit, &c.next);
    c.left = c.p != nullptr ? pl.count : 0;
  }
  // By a multiply or division of the whole slice on its way out
  // (DivideAllInto); by 1: copied; else each touched element divided.
  const bool divide_all = DividesAll(divisor);
  const bool track = !divide_all && divisor != 1.0f;
  float scale;
  const bool exact_scale = ExactReciprocal(divisor, &scale);
  alignas(64) float acc[kSlice];
  std::fill(acc, acc + kSlice, 0.0f);
  uint64_t touched[kSlice / 64];
  for (uint64_t s0 = 0; s0 < n; s0 += kSlice) {
    const uint64_t len = std::min(n - s0, kSlice);
    if (track) {
      std::fill(touched, touched + kSlice / 64, 0);
      for (size_t r = 0; r < payloads.size(); ++r) {
        AddSlice<true>(cursors[r], payloads[r].format, s0, s0 + len, acc, touched);
      }
      for (uint64_t w = 0; w < kSlice / 64; ++w) {
        for (uint64_t bits = touched[w]; bits != 0; bits &= bits - 1) {
          float& x = acc[64 * w + __builtin_ctzll(bits)];
          x = exact_scale ? x * scale : x / divisor;
        }
      }
    } else {
      for (size_t r = 0; r < payloads.size(); ++r) {
        AddSlice<false>(cursors[r], payloads[r].format, s0, s0 + len, acc, nullptr);
      }
    }
    if (divide_all) {
      DivideAllInto(acc, out + s0, len, divisor, stores);
    } else {
      std::memcpy(out + s0, acc, len * sizeof(float));
      std::memset(acc, 0, len * sizeof(float));
    }
  }
  if (stores == OutStores::kStreaming && divide_all) StreamingFence();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
