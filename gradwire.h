// gradwire: compressed gradient exchange for data-parallel training over
// commodity Ethernet. Include this one header; link @gradwire//:gradwire.
//
//   CompressionSpec spec = *CompressionSpec::Parse("topk:ratio=0.01");
//   std::unique_ptr<Codec> codec = *MakeCodec(spec);
//   ErrorFeedback ef(*codec);
//   std::vector<uint8_t> frame(codec->MaxEncodedBytes(grad.size()));
//   EncodeStats stats = *ef.Encode("layer1.weight", grad, step, absl::MakeSpan(frame));
//   ... send frame[0, stats.frame_bytes) ...
//   codec->DecodeAccumulate(received, absl::MakeSpan(sum));   // on every peer
#ifndef GRADWIRE_GRADWIRE_H_
#define GRADWIRE_GRADWIRE_H_

#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec.h"
#include "gradwire/lib/compression_spec.h"
#include "gradwire/lib/error_feedback.h"
#include "gradwire/lib/wire_format.h"

#endif  // GRADWIRE_GRADWIRE_H_
