#include "gradwire/lib/comm/codec_timing.h"

#include <algorithm>
#include <vector>

#include "gradwire/base/cpu_time.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace {

// The median CPU time of `reps` calls of `call` after one untimed call.
template <typename Call>
absl::StatusOr<double> MedianCpuSeconds(int reps, Call call) {
  GRADWIRE_RETURN_IF_ERROR(call());
  std::vector<double> seconds(reps);
  for (double& t : seconds) {
    const double t0 = ThreadCpuSeconds();
    GRADWIRE_RETURN_IF_ERROR(call());
    t = ThreadCpuSeconds() - t0;
  }
  std::nth_element(seconds.begin(), seconds.begin() + reps / 2, seconds.end());
  return seconds[reps / 2];
}

}  // namespace

absl::StatusOr<CodecTiming> TimeCodec(const Codec& codec, bool passes) {
  constexpr int kReps = 5, kDecodes = 4;
  std::vector<float> grad(kTimedElements), residual(kTimedElements, 0.0f), dense(kTimedElements);
  for (uint64_t i = 0; i < kTimedElements; ++i) {
    grad[i] = static_cast<float>((i * 2654435761u) % 20011) / 20011.0f - 0.5f;
  }
  std::vector<uint8_t> frame(codec.MaxEncodedBytes(kTimedElements));
  CodecScratch codec_scratch;
  EncodeStats encoded;
  auto encode = [&]() -> absl::Status {
    absl::StatusOr<EncodeStats> e =
        codec.Encode(grad, 0, absl::MakeSpan(residual), absl::MakeSpan(frame), &codec_scratch);
    if (e.ok()) encoded = *e;
    return e.status();
  };
  auto decode = [&]() -> absl::Status {
    for (int i = 0; i < kDecodes; ++i) {
      GRADWIRE_RETURN_IF_ERROR(
          codec.DecodeAccumulate(absl::MakeConstSpan(frame.data(), encoded.frame_bytes),
                                 absl::MakeSpan(dense), &codec_scratch));
    }
    return absl::OkStatus();
  };
  volatile uint64_t nonzero = 0;  // the scan's result is used
  auto dense_passes = [&]() -> absl::Status {
    std::fill(dense.begin(), dense.end(), 0.0f);
    uint64_t count = 0;
    for (float v : dense) count += v != 0.0f;
    nonzero = nonzero + count;
    return absl::OkStatus();
  };
  CodecTiming timing;
  GRADWIRE_ASSIGN_OR_RETURN(timing.encode_seconds, MedianCpuSeconds(kReps, encode));
  GRADWIRE_ASSIGN_OR_RETURN(const double decode_seconds, MedianCpuSeconds(kReps, decode));
  if (passes) {
    GRADWIRE_ASSIGN_OR_RETURN(timing.stream_seconds, MedianCpuSeconds(kReps, dense_passes));
  }
  if (encoded.selected > 0) {
    timing.decode_entries_per_second = kDecodes * encoded.selected / std::max(decode_seconds, 1e-7);
  }
  return timing;
}

}  // namespace gradwire
