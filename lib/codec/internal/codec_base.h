// Internal to :codec: what every codec keeps (its spec and the codec id its
// frames carry) and the first step of every frame check.
#ifndef GRADWIRE_LIB_CODEC_INTERNAL_CODEC_BASE_H_
#define GRADWIRE_LIB_CODEC_INTERNAL_CODEC_BASE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/internal/codec_frame.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {
namespace codec_internal {

class CodecBase : public Codec {
 public:
  const CompressionSpec& spec() const final { return spec_; }

 protected:
  explicit CodecBase(const CompressionSpec& spec) : spec_(spec), id_(CodecIdFor(spec.method)) {}

  // Everything DecodeAccumulate checks before touching values, for a dense
  // length of n: ParseFrameFor with this codec's id, then CheckHeader.
  absl::StatusOr<ParsedFrame> CheckFrame(
      absl::Span<const uint8_t> frame, uint64_t n,
      FrameIntegrity integrity = FrameIntegrity::kChecksum) const {
    absl::StatusOr<ParsedFrame> parsed = ParseFrameFor(frame, id_, n, integrity);
    if (!parsed.ok()) return parsed.status();
    if (absl::Status s = CheckHeader(*parsed, n); !s.ok()) return s;
    return parsed;
  }

  // The codec's own requirements of a parsed frame (header fields as
  // CheckFields, then any section contents it must vet).
  virtual absl::Status CheckHeader(const ParsedFrame& frame, uint64_t n) const = 0;

  absl::string_view name() const { return MethodName(spec_.method); }

  // A header with what every codec's frame states the same way: this
  // codec's id, the values' type, the dense length n, the count of values
  // carried, the step, the spec's seed and whether error feedback was
  // applied. The codec adds its index encoding, quantizer fields and
  // section sizes.
  FrameHeader HeaderFor(ValueType values, uint64_t n, uint64_t count, uint64_t step,
                        bool error_feedback) const {
    FrameHeader h;
    h.codec = id_;
    h.value_type = values;
    h.flags = error_feedback ? kFlagErrorFeedback : 0;
    h.dense_length = n;
    h.element_count = count;
    h.step = step;
    h.seed = spec_.seed;
    return h;
  }

  const CompressionSpec spec_;
  const CodecId id_;
};

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_INTERNAL_CODEC_BASE_H_
