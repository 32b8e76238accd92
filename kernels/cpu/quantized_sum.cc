#include "gradwire/kernels/cpu/quantized_sum.h"

#include <cstring>

#include "gradwire/kernels/cpu/quantize.h"
#include "gradwire/kernels/validate.h"

namespace gradwire {
namespace kernels {
namespace cpu {

absl::Status QuantizedSumToDense(absl::Span<const QuantizedPayload> payloads,
                                 const QuantizedFormat& f, absl::Span<float> dense,
                                 const SparseSumOptions& options) {
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
