#include "gradwire/kernels/cpu/sparse_sum.h"

#include <cstring>
#include <string>


namespace gradwire {
namespace kernels {
namespace cpu {
absl::Status SparseSumToDense(absl::Span<const SparsePayload> payloads, absl::Span<float> dense,
                              const SparseSumOptions& options) {
  const uint64_t n = dense.size();
  for (size_t w = 0; w < payloads.size(); ++w) {
    const SparsePayload& p = payloads[w];
    const std::string who = "SparseSumToDense: worker " + std::to_string(w);
    if (p.count > n) return absl::InvalidArgumentError(who + " has more entries than n");
    if (p.count > 0 && (p.indices == nullptr || p.values == nullptr)) {
      return absl::InvalidArgumentError(who + " has null buffers");
    }
    if (p.format != ValueFormat::kFp32 && p.format != ValueFormat::kFp16 &&
        p.format != ValueFormat::kBf16) {
      return absl::InvalidArgumentError(who + " has an unknown value type");
    }
    for (uint64_t j = 0; j < p.count; ++j) {
      if (p.indices[j] >= n) return absl::InvalidArgumentError(who + ": index out of range");
      if (j > 0 && p.indices[j] <= p.indices[j - 1]) {
        return absl::InvalidArgumentError(who + ": indices not strictly increasing");
      }
    }
  }
  if (!options.accumulate) std::memset(dense.data(), 0, n * sizeof(float));
  for (const SparsePayload& p : payloads) {
    for (uint64_t j = 0; j < p.count; ++j) dense[p.indices[j]] += LoadValue(p.values, j, p.format);
  }
  for (float& x : dense) x *= options.scale;
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
