// Error feedback: the residual each gradient buffer carries between steps.
//
// A lossy codec drops part of every gradient; error feedback adds what was
// dropped to the next step's gradient so nothing is lost for good (the
// codec.h contract: g + e_old == decode(frame) + e_new, bit for bit). One
// ErrorFeedback serves one codec and keeps one residual per gradient
// buffer, named by a key the caller chooses (e.g. the parameter's name).
// A residual is created as zeros the first time its key is encoded and its
// length is fixed from then on.
//
// It also owns the codec's working memory (a CodecScratch, grown to the
// largest gradient encoded and reused), so steady-state encodes allocate
// nothing.
//
// Device gradients (device_call.h): a residual
// lives where its gradient lives. The first Encode of a key with a device
// gradient allocates its residual on the call's device, zeroed on the
// call's stream (a host residual restored from a checkpoint is moved
// there instead); the codec updates it on the device. Checkpoints copy
// device residuals through the host, in the same checksummed format.
//
// Not thread-safe: use one per thread, or serialize calls.
#ifndef GRADWIRE_LIB_CODEC_ERROR_FEEDBACK_H_
#define GRADWIRE_LIB_CODEC_ERROR_FEEDBACK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/base/huge_pages.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/device_call.h"

namespace gradwire {

class ErrorFeedback {
 public:
  // `codec` must outlive this object.
  explicit ErrorFeedback(const Codec& codec) : codec_(codec) {}
  ~ErrorFeedback();

  ErrorFeedback(const ErrorFeedback&) = delete;
  ErrorFeedback& operator=(const ErrorFeedback&) = delete;

  // Encodes `grad` (buffer `key`, training step `step`) into `out` with
  // the key's residual, which the codec updates in the same pass. When the
  // codec's spec has error feedback off, encodes grad alone and keeps no
  // residual. InvalidArgument if `key` was seen with another length, or
  // with its gradient in the other place (host vs device). `device`: for a
  // device gradient (see above); ignored for a host one.
  absl::StatusOr<EncodeStats> Encode(absl::string_view key, absl::Span<const float> grad,
                                     uint64_t step, absl::Span<uint8_t> out,
                                     const DeviceCall* device = nullptr);

  // The key's residual; empty if the key has none yet. Device memory for a
  // device gradient's key (read it on that key's stream).
  absl::Span<const float> Residual(absl::string_view key) const;

  // The key's host residual, writable, for an exchange that adds to it
  // after the encode (the cast allreduce's owner adds the rounding of its
  // region's average, possibly on another thread than the next Encode of
  // another key). Empty if the key has none (no Encode yet, error feedback
  // off) or it is on the device. Stays valid until RestoreState, Clear or
  // an Encode of the key with another length.
  absl::Span<float> MutableHostResidual(absl::string_view key);

  // Gives back to the key's residual values that Encode took out of it
  // but the exchange then did not deliver (a sparse allreduce's global
  // re-selection dropped them): for each j,
  //   residual[indices[j]] = fl(residual[indices[j]] + values[j]),
  // or 0 where that is not finite (the codec's non-finite rule). For a
  // selection codec Encode left fl(acc - decoded) there exactly, so the
  // element holds acc again, as if it had not been selected. No-op when
  // error feedback is off. InvalidArgument, changing nothing, if the key
  // has no residual, the spans differ in length or an index is out of
  // range.
  absl::Status GiveBack(absl::string_view key, absl::Span<const uint32_t> indices,
                        absl::Span<const float> values);

  // Divides every residual by `divisor` (finite, > 0), host ones now,
  // device ones on their stream: a loss scale that changed from S to S'
  // puts residuals made under S into S' with divisor S / S'. Exact for
  // the powers of two a loss scaler steps by (barring underflow); an
  // element that overflows becomes non-finite, which the next Encode
  // counts, flags (a step the scaler skips) and resets to 0.
  // InvalidArgument, changing nothing, for a divisor that is not finite
  // and > 0; no residuals (error feedback off): nothing to do.
  absl::Status DivideAll(float divisor);

  // Number of buffers with a residual.
  size_t size() const { return residuals_.size() + device_residuals_.size(); }

  // Forgets every residual (e.g. after the model was reinitialized); waits
  // for each device residual's stream before freeing it.
  void Clear();

  // All residuals as bytes for a checkpoint: the codec's spec, then every
  // key with its fp32 values, then an XXH3-64 checksum. Little endian.
  // Device residuals are copied to the host on their stream and waited
  // for (at most `timeout` each); a failed copy is returned.
  absl::StatusOr<std::string> Save(absl::Duration timeout = absl::Seconds(60)) const;
  // Save(), or "" (which RestoreState refuses) if a device copy failed.
  std::string SaveState() const;

  // Replaces all residuals with those in `state` (from SaveState). Refuses,
  // changing nothing, a state that is truncated, corrupt (DataLoss), of an
  // unknown version, saved for a different codec spec, or holding a key
  // whose length differs from a residual this object already has. Keys
  // with a device residual are copied to the device and waited for.
  absl::Status RestoreState(absl::string_view state);

 private:
  struct DeviceResidual {
    kernels::Device* device = nullptr;
    kernels::cuda::Stream stream = nullptr;  // of the encodes that update it
    float* data = nullptr;
    size_t n = 0;
  };
  absl::StatusOr<float*> DeviceResidualFor(absl::string_view key, size_t n,
                                           const DeviceCall& device);

  const Codec& codec_;
  std::map<std::string, HugePageVector<float>, std::less<>> residuals_;  // streamed every step
  std::map<std::string, DeviceResidual, std::less<>> device_residuals_;
  CodecScratch scratch_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_ERROR_FEEDBACK_H_
