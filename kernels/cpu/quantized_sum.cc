#include "gradwire/kernels/cpu/quantized_sum.h"

#include <cstring>
#include <string>

#include "gradwire/kernels/cpu/quantize.h"

namespace gradwire {
namespace kernels {
namespace cpu {

absl::Status ValidateQuantizedSum(absl::Span<const QuantizedPayload> payloads, const QuantizedFormat& f,
                                  uint64_t n) {
  if (f.bits < 1 || f.bits > 8 || (f.sign && f.bits != 1)) {
    return absl::InvalidArgumentError("QuantizedSumToDense: bits must be 1..8 (1 for sign)");
  }
  if (f.bucket_size < 1) return absl::InvalidArgumentError("QuantizedSumToDense: bucket_size must be >= 1");
  for (size_t w = 0; w < payloads.size(); ++w) {
    if (n > 0 && (payloads[w].scales == nullptr || payloads[w].packed == nullptr)) {
      return absl::InvalidArgumentError("QuantizedSumToDense: worker " + std::to_string(w) + " has null sections");
    }
  }
  return absl::OkStatus();
}

absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads, const QuantizedFormat& f,
                                 absl::Span<float> dense, const SparseSumOptions& options) {
  absl::Status valid = ValidateQuantizedSum(payloads, f, dense.size());
  if (!valid.ok()) return valid;
  const uint64_t n = dense.size();
  if (!options.accumulate && n > 0) std::memset(dense.data(), 0, n * sizeof(float));
  for (const QuantizedPayload& p : payloads) {
    if (f.sign) {
      SignDecodeAccumulate(p.scales, p.packed, n, f.bucket_size, dense.data());
    } else {
      QsgdDecodeAccumulate(p.scales, p.packed, n, f.bits, f.bucket_size, dense.data());
    }
  }
  for (float& x : dense) x *= options.scale;
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
