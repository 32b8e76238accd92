// How fast a codec runs on this core, for the exchange cost model's
// measured figures (exchange_cost_model.h, AgreeExchangeModel with
// measure = true): one encode with error feedback, the decode rate of its
// frame's entries and the dense passes an exchange makes, each timed in
// this thread's CPU time on a synthetic gradient.
#ifndef GRADWIRE_LIB_COMM_CODEC_TIMING_H_
#define GRADWIRE_LIB_COMM_CODEC_TIMING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "gradwire/lib/codec/codec.h"

namespace gradwire {

// Elements of the synthetic gradient a codec is timed on.
inline constexpr uint64_t kTimedElements = uint64_t{1} << 20;

struct CodecTiming {
  double encode_seconds = 0;             // one encode of kTimedElements
  double decode_entries_per_second = 0;  // 0 when the frame held no entry
  double stream_seconds = 0;             // a zeroing and a scan (with `passes`)
};

// `codec` on kTimedElements of a synthetic gradient. One call of each is
// noise-dominated (page faults of fresh buffers; a rank descheduled on a
// shared core: one-shot decode rates of one run spanned 0.1-18 M
// entries/s). So: one untimed call, then the median of five, the decode
// (DecodeAccumulate of the encoded frame) timed over four calls (one is
// microseconds). With `passes`, the dense passes of an exchange too:
// zeroing the bucket, then a scan of it (the sparse allreduce's search
// for nonzero sums). CPU time, not wall time: a rank descheduled on a
// shared core would otherwise report the other ranks' work as its
// codec's (wall-clock rates of one run spanned 48-1147 M elements/s for
// the same encode). The codec's errors pass through.
absl::StatusOr<CodecTiming> TimeCodec(const Codec& codec, bool passes);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_CODEC_TIMING_H_
