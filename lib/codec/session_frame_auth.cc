#include "gradwire/lib/codec/session_frame_auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace {

constexpr uint8_t kSessionVersion = 2;
constexpr uint8_t kGmacTagBytes = 16;
constexpr size_t kFieldBytes = frame_auth_internal::kFieldBytes;

}  // namespace

SessionFrameAuth::SessionFrameAuth(const FrameAuthenticator& auth,
                                   std::shared_ptr<const ChunkMac> mac)
    : mac_(std::move(mac)), job_id_(auth.job_id()), job_fingerprint_(auth.job_fingerprint()) {}

absl::StatusOr<size_t> SessionFrameAuth::Sign(absl::Span<uint8_t> buffer, size_t frame_bytes,
                                              const FrameOrigin& origin) const {
  GRADWIRE_RETURN_IF_ERROR(frame_auth_internal::CheckRoom(buffer, frame_bytes, kTrailerBytes));
  uint8_t* trailer = buffer.data() + frame_bytes;
  uint8_t* fields = trailer + ChunkMac::kTrailerBytes;
  frame_auth_internal::WriteFields(kSessionVersion, kGmacTagBytes, origin, job_fingerprint_,
                                   fields);
  GRADWIRE_RETURN_IF_ERROR(mac_->SealFrame(absl::MakeConstSpan(fields, kFieldBytes),
                                           buffer.first(frame_bytes), trailer));
  return frame_bytes + kTrailerBytes;
}

absl::StatusOr<absl::Span<const uint8_t>> SessionFrameAuth::Verify(
    absl::Span<const uint8_t> authenticated, const FrameOrigin& expected) const {
  GRADWIRE_RETURN_IF_ERROR(frame_auth_internal::CheckStructure(authenticated, kTrailerBytes,
                                                               kSessionVersion, kGmacTagBytes));
  const absl::Span<const uint8_t> frame = authenticated.first(authenticated.size() - kTrailerBytes);
  const uint8_t* trailer = frame.data() + frame.size();
  const uint8_t* fields = trailer + ChunkMac::kTrailerBytes;
  if (absl::Status s = mac_->VerifyFrame(absl::MakeConstSpan(fields, kFieldBytes), frame, trailer);
      !s.ok()) {
    if (!absl::IsUnauthenticated(s)) return s;  // the MAC library failed
    return absl::UnauthenticatedError(absl::StrCat(
        "frame auth: MAC mismatch on a ", frame.size(),
        "-byte frame: altered in transit, or signed with a different job secret or in another "
        "session"));
  }
  GRADWIRE_RETURN_IF_ERROR(
      frame_auth_internal::CheckOrigin(fields, job_fingerprint_, job_id_, expected));
  return frame;
}

}  // namespace gradwire
