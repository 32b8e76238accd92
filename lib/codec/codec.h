// A codec turns a dense fp32 gradient into one wire frame and back.
//
// The shape follows CUB: ask how large the output can be, encode into a
// caller-owned buffer, decode-and-accumulate into a caller-owned dense
// buffer. A codec holds no per-gradient state: error feedback lives in an
// ErrorFeedback object (error_feedback.h) which passes its residual to
// Encode so the kernel can fuse "add residual, compress, store new
// residual" into one pass.
//
// Error-feedback contract, per element i, with acc = fl(g[i] + e_old[i]):
//   e_new[i] == fl(acc - decode(frame)[i])       (bit for bit, every codec,
//       whenever that is finite; see the non-finite policy)
//   fl(decode(frame)[i] + e_new[i]) == acc       (bit for bit whenever the
//       subtraction is exact: always for selection and cast codecs; for
//       quantizers when the decoded value is within a factor 2 of acc)
// Non-finite policy: NaN ranks lowest for selection (never chosen ahead of
// a number), ±Inf highest; a residual element that would be NaN or ±Inf is
// reset to 0 (so one bad step cannot poison every later one), and
// non-finite acc elements are counted in EncodeStats. A frame whose acc
// held any is flagged (kFlagNonFinite, wire_format.h) and decodes as NaN in
// every element, whatever the codec selected or quantized of it: a
// non-finite gradient on one rank is non-finite on every rank after the
// exchange, as after a dense allreduce, so a loss scaler (AMP's
// GradScaler) skips that step on every rank. Without the flag a codec that
// drops NaN (selection) or zeroes a non-finite bucket (qsgd, sign) would
// hide the overflow.
//
// Which codec does what: cast_codec.h (none, fp16, bf16), sparse_codec.h
// (topk, approx_topk, randomk), quantized_codec.h (qsgd, sign).
//
// Working memory: a codec is immutable and thread-safe, so it keeps no
// scratch of its own. Selection codecs need some (the kernels' candidate
// lists, where a host encode's selection also stays until it is coded;
// decoded index lists; a device encode's outputs on their way back): pass
// a CodecScratch, owned by the caller and reused across calls, and
// Encode / DecodeAccumulate allocate nothing once it has grown to the
// largest gradient seen. Without one, the call allocates and
// frees its own (fine for one-off use and tests).
//
// Device buffers (device_call.h): every call
// below runs where its gradient / dense buffer lives, through
// kernels/dispatch. A device buffer needs a DeviceCall (the caller's
// stream and device scratch); frames stay host bytes either way, and the
// results are the host path's bit for bit.
#ifndef GRADWIRE_LIB_CODEC_CODEC_H_
#define GRADWIRE_LIB_CODEC_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/device_call.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {

struct EncodeStats {
  size_t frame_bytes = 0;  // bytes written to the output
  uint64_t selected = 0;   // values carried (k for sparse codecs)
  uint64_t nonfinite = 0;  // NaN/Inf elements seen in g + e_old
};

// Reusable working memory for Codec calls: one buffer, grown on demand to
// the largest request and never shrunk. Thread-compatible: one thread at
// a time (an ErrorFeedback owns one for its encodes, a
// SparseAllgather one for its decodes).
class CodecScratch {
 public:
  CodecScratch() = default;
  CodecScratch(const CodecScratch&) = delete;
  CodecScratch& operator=(const CodecScratch&) = delete;

  // At least `bytes` bytes, 64-byte aligned, contents unspecified. Valid
  // until the next Get; allocates only when `bytes` exceeds every earlier
  // request.
  uint8_t* Get(size_t bytes);

  // Bytes held (what the largest request so far needed).
  size_t capacity() const { return capacity_; }

 private:
  // uint64_t-typed storage, default-initialized: growing does not write
  // the buffer (the selection kernels touch little of their worst case).
  std::unique_ptr<uint64_t[]> storage_;
  size_t capacity_ = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual const CompressionSpec& spec() const = 0;

  // Largest frame Encode can write for a gradient of n elements.
  virtual size_t MaxEncodedBytes(uint64_t n) const = 0;

  // Encodes gradient `grad` for training step `step` into `out`, which
  // must hold MaxEncodedBytes(grad.size()). If `residual` is non-empty
  // (same length as grad) the codec encodes grad + residual and overwrites
  // residual with the new residual. Arguments are checked before anything
  // is written: a refused call leaves residual as it was. grad.size() is at
  // most 2^32. `scratch`: working memory reused across calls (see above);
  // null: the call uses its own.
  absl::StatusOr<EncodeStats> Encode(absl::Span<const float> grad, uint64_t step,
                                     absl::Span<float> residual, absl::Span<uint8_t> out,
                                     CodecScratch* scratch = nullptr,
                                     const DeviceCall* device = nullptr) const;

  // Validates `frame` completely (wire format, codec id and settings match
  // this codec, lengths, indices), then adds its decoded values to `dense`,
  // whose length must equal the frame's dense length. Nothing in `dense`
  // changes unless the whole frame is valid. A frame flagged non-finite
  // sets every element of `dense` to NaN. `scratch` as for Encode.
  absl::Status DecodeAccumulate(absl::Span<const uint8_t> frame, absl::Span<float> dense,
                                CodecScratch* scratch = nullptr,
                                const DeviceCall* device = nullptr) const;

  // The receive side of a compressed allreduce: averages P frames into
  // `out` (every frame's dense length must be out.size()):
  //   out[i] = (((0 + d_0[i]) + d_1[i]) + ... + d_{P-1}[i]) / divisor
  // added left to right in frame order, then divided once: bit for bit
  // what DecodeAccumulate of each frame, in order, into zeros followed by
  // a division of every element by `divisor` gives. Every frame is
  // validated before `out` is touched (`integrity`: FrameIntegrity,
  // wire_format.h; kVerifiedByCaller where the caller has verified every
  // frame's MAC, which spares the checksum's pass over the frames): on
  // error `out` is unchanged and `*bad_frame` (if not null) is the index
  // of the first invalid frame (frames.size() when the arguments
  // themselves are refused). `divisor`
  // must be positive and finite. `scratch` as for Encode. The quantizers
  // (qsgd, sign) also refuse, as the frame whose scales tip it over, a set
  // whose average could overflow fp32 (P frames of finite scales near
  // FLT_MAX would sum to inf): their averages are always finite. If any
  // frame is flagged non-finite, every element of `out` is NaN instead.
  //
  // Why not DecodeAccumulate in a loop: that needs a sum buffer (out must
  // survive a bad frame) and two more dense passes (zero it, divide it
  // into out). Validating first lets the sum live in `out`, and a sparse
  // codec divides only the elements some frame touched.
  absl::Status DecodeAverage(absl::Span<const absl::Span<const uint8_t>> frames, float divisor,
                             absl::Span<float> out, CodecScratch* scratch = nullptr,
                             size_t* bad_frame = nullptr, const DeviceCall* device = nullptr,
                             FrameIntegrity integrity = FrameIntegrity::kChecksum) const;

 protected:
  // What each codec implements; the public calls check the arguments
  // (EncodeWith: sizes of grad, residual and out) and supply the scratch
  // and `device`: null for host buffers, else the checked DeviceCall of a
  // call on device buffers.
  virtual absl::StatusOr<EncodeStats> EncodeWith(absl::Span<const float> grad, uint64_t step,
                                                 absl::Span<float> residual,
                                                 absl::Span<uint8_t> out, CodecScratch& scratch,
                                                 const DeviceCall* device) const = 0;
  virtual absl::Status DecodeAccumulateWith(absl::Span<const uint8_t> frame,
                                            absl::Span<float> dense, CodecScratch& scratch,
                                            const DeviceCall* device) const = 0;
  // Called with checked arguments (divisor positive and finite); reports
  // the first invalid frame's index in *bad_frame (never null here).
  virtual absl::Status DecodeAverageWith(absl::Span<const absl::Span<const uint8_t>> frames,
                                         float divisor, absl::Span<float> out,
                                         CodecScratch& scratch, size_t* bad_frame,
                                         const DeviceCall* device,
                                         FrameIntegrity integrity) const = 0;
};

// Builds the codec for `spec` (validated first).
absl::StatusOr<std::unique_ptr<Codec>> MakeCodec(const CompressionSpec& spec);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_CODEC_H_
