// The cast allreduce's step 6 (lib/comm/cast_allreduce.h) as the rank
// programs' references compute it (cast_allreduce_rank.cc, comm_rank.cc):
// what a region's owner does to its average, written once for both.
#ifndef GRADWIRE_TESTS_COMM_CAST_REFERENCE_H_
#define GRADWIRE_TESTS_COMM_CAST_REFERENCE_H_

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/types/span.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/compression_spec.h"

namespace gradwire {

// The 16-bit rounding (fp16 or bf16, by `method`) of a + 0, the codec's
// kernel on a zero residual, decoded into `out` (same length; may be a),
// and what it lost into `lost`.
inline void RoundTo16(Method method, absl::Span<const float> a, absl::Span<float> out,
                      std::vector<float>* lost) {
  const auto format =
      method == Method::kBf16 ? kernels::ValueFormat::kBf16 : kernels::ValueFormat::kFp16;
  std::vector<uint8_t> values(2 * a.size() + 1);
  lost->assign(a.size(), 0.0f);
  const uint8_t* v = values.data();
  if (!kernels::CastCompress(a.data(), lost->data(), a.size(), format, values.data(), nullptr)
           .ok() ||
      !kernels::CastDecodeAverage(absl::MakeConstSpan(&v, 1), a.size(), format, 1.0f, out.data())
           .ok()) {
    std::printf("SETUP rounding failed\n");
    std::exit(2);
  }
}

// What the owner of [begin, end) keeps: e[i] += divisor * lost[i] there
// (ResidualAfter: 0 where not finite). Nothing without a residual.
inline void KeepRounding(absl::Span<float> e, const std::vector<float>& lost, uint64_t begin,
                         uint64_t end, float divisor) {
  if (e.empty()) return;  // error feedback off
  for (uint64_t i = begin; i < end; ++i) {
    e[i] = kernels::ResidualAfter(e[i], -(divisor * lost[i]));
  }
}

}  // namespace gradwire

#endif  // GRADWIRE_TESTS_COMM_CAST_REFERENCE_H_
