// Frame authentication under a session's key: AES-256-GMAC (trailer
// version 2), the FrameSigner the Communicator's exchanges use.
//
// FrameAuthenticator's HMAC-SHA256 runs at ~2 GB/s on one core; a rank of a
// sparse allgather verifies every peer's frame, so at P ranks it MACs P
// frames a bucket, and at 10-25 Gbit/s the MAC alone would take as long as
// the wire. GMAC (AES-NI + carry-less multiply) runs at ~10 GB/s
// (docs/communicator.md, "Which MAC"), but must never see one IV twice
// under a key: the key here is the session's (ChunkMac: fresh per
// Communicator from every rank's random nonce) and the IV is (sealing
// rank, that rank's seal counter), shared with the session's dense chunks.
// So a frame needs the ranks' key round first; FrameAuthenticator needs
// nothing but the secret and stays for everything without a session.
//
// The trailer carries the same 40 fields as version 1 (origin, job), bound
// into the tag as the GMAC's context, and Verify refuses the same frames
// with the same errors, plus any frame sealed in another session. Byte
// layout: docs/wire_format.md, "Authentication trailer".
#ifndef GRADWIRE_LIB_CODEC_SESSION_FRAME_AUTH_H_
#define GRADWIRE_LIB_CODEC_SESSION_FRAME_AUTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/chunk_mac.h"
#include "gradwire/lib/codec/frame_auth.h"

namespace gradwire {

class SessionFrameAuth : public FrameSigner {
 public:
  // IV and tag (ChunkMac's trailer), then the fields.
  static constexpr size_t kTrailerBytes =
      ChunkMac::kTrailerBytes + FrameAuthenticator::kTrailerFieldBytes;

  // Frames of job `auth` (its id and fingerprint; the secret is not used)
  // under session key `mac`, which the dense chunks' authenticator may
  // share.
  SessionFrameAuth(const FrameAuthenticator& auth, std::shared_ptr<const ChunkMac> mac);

  size_t trailer_bytes() const override { return kTrailerBytes; }
  absl::StatusOr<size_t> Sign(absl::Span<uint8_t> buffer, size_t frame_bytes,
                              const FrameOrigin& origin) const override;
  absl::StatusOr<absl::Span<const uint8_t>> Verify(absl::Span<const uint8_t> authenticated,
                                                   const FrameOrigin& expected) const override;

 private:
  std::shared_ptr<const ChunkMac> mac_;
  std::string job_id_;
  std::array<uint8_t, 16> job_fingerprint_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_SESSION_FRAME_AUTH_H_
