#include "gradwire/lib/codec.h"

#include "gradwire/lib/cast_codec.h"
#include "gradwire/lib/quantized_codec.h"
#include "gradwire/lib/sparse_codec.h"

namespace gradwire {

absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CompressionSpec& spec) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  switch (spec.method) {
    case Method::kNone:
    case Method::kFp16:
    case Method::kBf16:
      return NewCastCodec(spec);
    case Method::kTopK:
    case Method::kApproxTopK:
    case Method::kRandomK:
      return NewSparseCodec(spec);
    case Method::kQsgd:
    case Method::kSign:
      return NewQuantizedCodec(spec);
  }
  return absl::InvalidArgumentError("--compression: unknown method");
}

}  // namespace gradwire
