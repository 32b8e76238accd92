#include "gradwire/kernels/cpu/sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/container/inlined_vector.h"

namespace gradwire {
namespace kernels {
namespace cpu {

void SparseDecodeAccumulate(const uint32_t* indices, const uint8_t* values, uint64_t k,
                            ValueFormat format, float* dense) {
  for (uint64_t j = 0; j < k; ++j) dense[indices[j]] += LoadValue(values, j, format);
}

namespace {

constexpr uint64_t kChunk = 4096;  // 16 KiB of out: stays in L1
// A chunk with at least len / kDenseScaleRatio entries is scaled whole
// (about half a cycle an element) rather than entry by entry through the
// bitmap (several cycles an entry).
constexpr uint64_t kDenseScaleRatio = 8;
constexpr uint64_t kPrezeroRatio = 32;

// x / d == x * (1 / d), bit for bit, for every float x exactly when 1 / d
// is itself a float, i.e. d is a power of two whose reciprocal neither
// overflows nor underflows to 0 (both are then the one correctly rounded
// value of the same real number).
bool ReciprocalIsExact(float d) {
  const float s = 1.0f / d;
  int e = 0;
  return std::isfinite(s) && s != 0.0f && std::frexp(d, &e) == 0.5f && std::frexp(s, &e) == 0.5f;
}

template <ValueFormat kFormat>
void SparseAverageAs(const SparseRun* runs, uint64_t p, float divisor, float* out, uint64_t n) {
  const bool exact_scale = ReciprocalIsExact(divisor);
  const float scale = 1.0f / divisor;
  // Per run: where its entries for the current chunk begin and end (on
  // the stack for up to 16 runs, as the callers' frame lists are).
  absl::InlinedVector<uint64_t, 16> begin(p, 0), end(p, 0);
  uint64_t touched[kChunk / 64];
  uint64_t total = 0;
  for (uint64_t r = 0; r < p; ++r) total += runs[r].k;
  // Sparser than one entry in kPrezeroRatio elements: one memset of all of
  // out (fast string stores, no read of the old lines) beats zeroing chunk
  // by chunk, and the few lines entries land in are read back.
  const bool prezero = total * kPrezeroRatio < n;
  if (prezero) std::memset(out, 0, n * sizeof(float));
  for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
    const uint64_t len = std::min(n - c0, kChunk);
    float* chunk = out + c0;
    if (!prezero) std::fill(chunk, chunk + len, 0.0f);
    for (uint64_t r = 0; r < p; ++r) {
      const SparseRun& run = runs[r];
      uint64_t j = begin[r];
      for (; j < run.k && run.indices[j] < c0 + len; ++j) {
        chunk[run.indices[j] - c0] += LoadValue(run.values, j, kFormat);
      }
      end[r] = j;
    }
    uint64_t entries = 0;
    for (uint64_t r = 0; r < p; ++r) entries += end[r] - begin[r];
    if (divisor == 1.0f || entries == 0) {
      // x / 1 == x, and an empty chunk is all +0: nothing to divide.
    } else if (exact_scale && entries * kDenseScaleRatio >= len) {
      // Untouched elements are +0, and +0 * scale == +0 / divisor: one
      // vectorized pass over the cached chunk beats finding the touched.
      for (uint64_t i = 0; i < len; ++i) chunk[i] *= scale;
    } else {
      // Each touched element once, although several runs may hold it.
      std::fill(touched, touched + kChunk / 64, uint64_t{0});
      for (uint64_t r = 0; r < p; ++r) {
        for (uint64_t j = begin[r]; j < end[r]; ++j) {
          const uint64_t local = runs[r].indices[j] - c0;
          const uint64_t bit = uint64_t{1} << (local & 63);
          if ((touched[local >> 6] & bit) != 0) continue;
          touched[local >> 6] |= bit;
          chunk[local] = exact_scale ? chunk[local] * scale : chunk[local] / divisor;
        }
      }
    }
    begin.swap(end);
  }
}

}  // namespace

void SparseAverage(const SparseRun* runs, uint64_t p, ValueFormat format, float divisor,
                   float* out, uint64_t n) {
  switch (format) {
    case ValueFormat::kFp32:
      return SparseAverageAs<ValueFormat::kFp32>(runs, p, divisor, out, n);
    case ValueFormat::kFp16:
      return SparseAverageAs<ValueFormat::kFp16>(runs, p, divisor, out, n);
    case ValueFormat::kBf16:
      return SparseAverageAs<ValueFormat::kBf16>(runs, p, divisor, out, n);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
