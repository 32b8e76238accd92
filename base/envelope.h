// Checksummed envelope: the one "magic + version + body + checksum" framing
// gradwire's persistent formats share (error-feedback state, communicator
// checkpoints; see docs/ for each body's grammar).
//
//   magic (4 or 8 bytes, per format) | u32 version | body | u64 XXH3-64
//
// The checksum covers every byte before it. OpenEnvelope checks, in order:
// length and magic (kInvalidArgument: "<what>: bad magic"), checksum (kDataLoss:
// the bytes are corrupt), version (kInvalidArgument naming the version read
// and the versions this build reads). Only then is the body handed out, so a
// body parser never sees bytes that fail the checksum.
//
//   std::string out = StartEnvelope("GWEF", 1);
//   PutFixed32(&out, ...);               // body, with base/coding.h
//   SealEnvelope(&out);
//
//   GRADWIRE_ASSIGN_OR_RETURN(Envelope e, OpenEnvelope(bytes, "GWEF", 1, 1,
//                                                      "error-feedback state"));
//   ByteReader r(e.body, "error-feedback state");
#ifndef GRADWIRE_BASE_ENVELOPE_H_
#define GRADWIRE_BASE_ENVELOPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {

// XXH3-64 (seed 0): the checksum of envelopes and codec frames.
uint64_t Checksum64(const void* data, size_t n);
inline uint64_t Checksum64(absl::string_view bytes) {
  return Checksum64(bytes.data(), bytes.size());
}

// Checksum64 of the concatenation of every Update, in order, without
// concatenating (XXH3's streaming form, the same digest for any split).
// A writer can checksum bytes chunk by chunk while they are still in
// cache instead of reading them back once all are written.
class StreamingChecksum64 {
 public:
  StreamingChecksum64();
  StreamingChecksum64(const StreamingChecksum64&) = delete;
  StreamingChecksum64& operator=(const StreamingChecksum64&) = delete;

  void Update(const void* data, size_t n);
  // The checksum of the bytes so far; Update may go on after it.
  uint64_t Digest() const;
  // How many bytes the checksum covers.
  uint64_t bytes() const { return bytes_; }

 private:
  alignas(64) unsigned char state_[576];  // XXH3_state_t, kept out of this header
  uint64_t bytes_ = 0;
};

constexpr size_t kEnvelopeChecksumBytes = 8;

// A new envelope: magic and version written, ready for the body.
std::string StartEnvelope(absl::string_view magic, uint32_t version);
// Appends the checksum of everything in *out.
void SealEnvelope(std::string* out);

struct Envelope {
  uint32_t version = 0;
  absl::string_view body;  // points into the bytes given to OpenEnvelope
};

// Checks an envelope (see the file comment); `what` names the format in
// errors ("error-feedback state").
absl::StatusOr<Envelope> OpenEnvelope(absl::string_view bytes, absl::string_view magic,
                                      uint32_t min_version, uint32_t max_version,
                                      absl::string_view what);

}  // namespace gradwire

#endif  // GRADWIRE_BASE_ENVELOPE_H_
