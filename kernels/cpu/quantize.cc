#include "gradwire/kernels/cpu/quantize.h"

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// Appends `bits`-wide codes LSB first, writing whole bytes as they fill, so
// the packed output needs no zeroing pass and its tail bits end up zero.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  void Put(uint32_t code, uint32_t bits) {
    acc_ |= static_cast<uint64_t>(code) << used_;
    used_ += bits;
    while (used_ >= 8) {
      *out_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      used_ -= 8;
    }
  }
  void Flush() {
    if (used_ > 0) *out_++ = static_cast<uint8_t>(acc_);
    acc_ = 0;
    used_ = 0;
  }

 private:
  uint8_t* out_;
  uint64_t acc_ = 0;
  uint32_t used_ = 0;
};

class BitReader {
 public:
  explicit BitReader(const uint8_t* in) : in_(in) {}
  uint32_t Get(uint32_t bits) {
    if (avail_ < bits) {
      acc_ |= static_cast<uint64_t>(*in_++) << avail_;
      avail_ += 8;
    }
    const uint32_t code = static_cast<uint32_t>(acc_) & ((1u << bits) - 1u);
    acc_ >>= bits;
    avail_ -= bits;
    return code;
  }

 private:
  const uint8_t* in_;
  uint64_t acc_ = 0;
  uint32_t avail_ = 0;
};

// Makes acc = grad + residual for one bucket, stored in the residual (or
// just grad without one); returns where acc lives.
const float* AccumulateBucket(const float* grad, float* residual, uint64_t len) {
  if (residual == nullptr) return grad;
  for (uint64_t i = 0; i < len; ++i) residual[i] = grad[i] + residual[i];
  return residual;
}

}  // namespace

void QsgdCompress(const float* grad, float* residual, uint64_t n, uint32_t bits,
                  uint32_t bucket_size, uint64_t seed, uint64_t step, uint8_t* scales,
                  uint8_t* packed, FusedStats* stats) {
  const uint32_t max_code = QsgdMaxCode(bits);
  const uint64_t rounding = StreamKey(seed, step, kStreamRounding);
  // QsgdDequantize(q, s) == MulRn(QsgdUnitLevel(q), s): hoist the division.
  float unit[256];
  for (uint32_t q = 0; q <= max_code; ++q) unit[q] = QsgdUnitLevel(q, max_code);
  BitWriter writer(packed);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = residual != nullptr ? residual + start : nullptr;
    const float* acc = AccumulateBucket(grad + start, res, len);
    float scale = 0.0f;
    for (uint64_t i = 0; i < len; ++i) {
      if (IsFinite(acc[i])) {
        const float m = AbsF(acc[i]);
        scale = m > scale ? m : scale;
      } else {
        ++nonfinite;
      }
    }
    StoreValue(scales, bucket, scale, ValueFormat::kFp32);
    for (uint64_t i = 0; i < len; ++i) {
      const float a = acc[i];
      const float u = UnitFloat(ElementHash(rounding, start + i));
      const uint32_t code = QsgdQuantize(a, scale, max_code, u);
      writer.Put(code, bits);
      if (res != nullptr) res[i] = ResidualAfter(a, MulRn(unit[code], scale));
    }
  }
  writer.Flush();
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void QsgdDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n, uint32_t bits,
                          uint32_t bucket_size, float* dense) {
  const uint32_t max_code = QsgdMaxCode(bits);
  // QsgdDequantize(q, s) == MulRn(QsgdUnitLevel(q), s): hoist the division.
  float unit[256];
  for (uint32_t q = 0; q <= max_code; ++q) unit[q] = QsgdUnitLevel(q, max_code);
  BitReader reader(packed);
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    const float scale = LoadValue(scales, bucket, ValueFormat::kFp32);
    float* d = dense + start;
    for (uint64_t i = 0; i < len; ++i) d[i] += MulRn(unit[reader.Get(bits)], scale);
  }
}

void SignCompress(const float* grad, float* residual, uint64_t n, uint32_t bucket_size,
                  uint8_t* scales, uint8_t* packed, FusedStats* stats) {
  BitWriter writer(packed);
  uint64_t nonfinite = 0;
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t len = n - start < bucket_size ? n - start : bucket_size;
    float* res = residual != nullptr ? residual + start : nullptr;
    const float* acc = AccumulateBucket(grad + start, res, len);
    double sum = 0.0;
    uint64_t finite = 0;
    for (uint64_t i = 0; i < len; ++i) {
      if (IsFinite(acc[i])) {
        sum += AbsF(acc[i]);
        ++finite;
      }
    }
    nonfinite += len - finite;
    const float scale = finite > 0 ? static_cast<float>(sum / static_cast<double>(finite)) : 0.0f;
    StoreValue(scales, bucket, scale, ValueFormat::kFp32);
    for (uint64_t i = 0; i < len; ++i) {
      const uint32_t code = SignCode(acc[i]);
      writer.Put(code, 1);
      if (res != nullptr) res[i] = ResidualAfter(acc[i], SignDecode(code, scale));
    }
  }
  writer.Flush();
  if (stats != nullptr) {
    stats->selected = n;
    stats->nonfinite = nonfinite;
  }
}

void SignDecodeAccumulate(const uint8_t* scales, const uint8_t* packed, uint64_t n,
                          uint32_t bucket_size, float* dense) {
  // For each byte value, the eight signs as ±1.0f: sign * scale is exactly
  // SignDecode(code, scale) (flipping a sign is exact), and whole bytes of
  // eight elements then decode with constant shifts in a loop that
  // vectorizes.
  static const float* signs = [] {
    float* t = new float[256 * 8];
    for (uint32_t byte = 0; byte < 256; ++byte) {
      for (uint32_t b = 0; b < 8; ++b) t[byte * 8 + b] = SignDecode((byte >> b) & 1u, 1.0f);
    }
    return t;
  }();
  for (uint64_t start = 0, bucket = 0; start < n; start += bucket_size, ++bucket) {
    const uint64_t end = n - start < bucket_size ? n : start + bucket_size;
    const float scale = LoadValue(scales, bucket, ValueFormat::kFp32);
    uint64_t i = start;
    for (; i < end && (i & 7) != 0; ++i)
      dense[i] += SignDecode((packed[i >> 3] >> (i & 7)) & 1u, scale);
    for (; i + 8 <= end; i += 8) {
      const float* s = signs + packed[i >> 3] * 8;
      float* d = dense + i;
      for (uint32_t b = 0; b < 8; ++b) d[b] += s[b] * scale;
    }
    for (; i < end; ++i) dense[i] += SignDecode((packed[i >> 3] >> (i & 7)) & 1u, scale);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
