// Bucketed quantizing codecs: QSGD (spec.quant_bits, stochastic rounding)
// and EF-signSGD (1 bit), with one fp32 scale per spec.bucket_size
// elements (kernels/cpu/quantize.h has the element math and bit layout).
// Frame: no indices, ceil(n / bucket) fp32 scales, packed codes.
// Decoding refuses scales that are not finite and >= 0, and DecodeAverage
// refuses a set of frames whose scales could sum past fp32's range.
//
// QSGD's rounding randomness comes from (spec.seed, step). Nothing on the
// receiver needs it, so give each rank its own seed (e.g. seed + rank):
// otherwise every rank rounds the same way and the noise does not average.
#ifndef GRADWIRE_LIB_CODEC_QUANTIZED_CODEC_H_
#define GRADWIRE_LIB_CODEC_QUANTIZED_CODEC_H_

#include <memory>

#include "gradwire/lib/codec/codec.h"

namespace gradwire {

// `spec` is valid and its method is kQsgd or kSign.
std::unique_ptr<Codec> NewQuantizedCodec(const CompressionSpec& spec);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_QUANTIZED_CODEC_H_
