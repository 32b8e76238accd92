#include "gradwire/lib/comm/session_chunk_auth.h"

#include <utility>
#include <vector>

#include "gradwire/base/status_macros.h"
#include "gradwire/lib/codec/chunk_mac.h"
#include "gradwire/lib/codec/session_frame_auth.h"

namespace gradwire {
namespace {

class SessionChunkAuth : public transport::ChunkAuthenticator {
 public:
  explicit SessionChunkAuth(std::shared_ptr<const ChunkMac> mac) : mac_(std::move(mac)) {}
  size_t trailer_bytes() const override { return ChunkMac::kTrailerBytes; }
  absl::Status Seal(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                    uint8_t* trailer) const override {
    return mac_->Seal(context, chunk, trailer);
  }
  absl::Status Verify(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                      const uint8_t* trailer) const override {
    return mac_->Verify(context, chunk, trailer);
  }

 private:
  std::shared_ptr<const ChunkMac> mac_;
};

}  // namespace

absl::StatusOr<SessionAuth> AgreeSessionAuth(transport::GlooGroup& group,
                                             const FrameAuthenticator& auth) {
  const uint32_t p = static_cast<uint32_t>(group.size());
  GRADWIRE_ASSIGN_OR_RETURN(const auto nonce, ChunkMac::NewNonce());
  std::vector<uint8_t> nonces(p * ChunkMac::kNonceBytes);
  GRADWIRE_RETURN_IF_ERROR(group.Allgather(nonce, absl::MakeSpan(nonces)));
  GRADWIRE_ASSIGN_OR_RETURN(ChunkMac mac, ChunkMac::Create(auth, group.rank(), p, nonces));
  std::vector<uint8_t> confirmations(p * ChunkMac::kConfirmationBytes);
  GRADWIRE_RETURN_IF_ERROR(group.Allgather(mac.Confirmation(), absl::MakeSpan(confirmations)));
  GRADWIRE_RETURN_IF_ERROR(mac.CheckConfirmations(confirmations, group.world_ranks()));
  auto shared = std::make_shared<const ChunkMac>(std::move(mac));
  SessionAuth session;
  session.chunks = std::make_unique<SessionChunkAuth>(shared);
  session.frames = std::make_unique<SessionFrameAuth>(auth, shared);
  return session;
}

}  // namespace gradwire
