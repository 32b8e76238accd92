// Dense codecs: "none" (fp32 as is), fp16 and bf16 casts, each value
// rounded to nearest even with finite overflow saturated
// (kernels/element_math.h). Frame: no indices, no scales, n values.
#ifndef GRADWIRE_LIB_CODEC_CAST_CODEC_H_
#define GRADWIRE_LIB_CODEC_CAST_CODEC_H_

#include <memory>

#include "gradwire/lib/codec/codec.h"

namespace gradwire {

// `spec` is valid and its method is kNone, kFp16 or kBf16.
std::unique_ptr<Codec> NewCastCodec(const CompressionSpec& spec);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_CAST_CODEC_H_
