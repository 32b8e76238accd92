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
//
// Or let gradwire run the exchange: Communicator::Connect(config, secret,
// options) joins the job (torchrun/mpirun environment, a file store or a
// password-protected Redis), and GradientExchanger takes gradients layer by
// layer and averages them across ranks in buckets on a background thread.
//
// Gradients in GPU memory (docs/device_path.md): the codecs take device
// buffers with a DeviceCall (stream + scratch), and
// Communicator::AllreduceMeanOnDevice exchanges a device buffer moving only
// compressed frames through the host; GradientExchanger takes device
// gradients too (ExchangerOptions::stream). Both ran on an H200 (2026-11-27,
// bit for bit against host buffers, memcheck clean; docs/device_path.md);
// CI tests them on kernels::HostDevice.
#ifndef GRADWIRE_GRADWIRE_H_
#define GRADWIRE_GRADWIRE_H_

#include "gradwire/kernels/device.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/device_call.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/codec/wire_format.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "gradwire/lib/comm/gradient_exchanger.h"
#include "gradwire/transport/rendezvous_config.h"

#endif  // GRADWIRE_GRADWIRE_H_
