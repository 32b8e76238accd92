// A session's MACs: the ChunkAuthenticator that the sealed collectives
// (transport/sealed_ring.h) take and the FrameSigner the sparse exchanges
// take, both keyed by one ChunkMac (lib/codec/chunk_mac.h) that every rank
// of a group agrees on from the job secret and fresh nonces.
#ifndef GRADWIRE_LIB_COMM_SESSION_CHUNK_AUTH_H_
#define GRADWIRE_LIB_COMM_SESSION_CHUNK_AUTH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

struct SessionAuth {
  std::unique_ptr<transport::ChunkAuthenticator> chunks;  // dense chunks
  std::unique_ptr<FrameSigner> frames;                    // compressed frames (GMAC, version 2)
};

// Collective over `group`: two small allgathers (every rank's nonce, then
// every rank's key confirmation). A rank holding another secret makes it
// fail on every rank with Unauthenticated naming that rank (another job id
// sharing the secret: PermissionDenied). The result holds its own key;
// frames and chunks draw IVs from its one counter.
absl::StatusOr<SessionAuth> AgreeSessionAuth(transport::GlooGroup& group,
                                             const FrameAuthenticator& auth);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_SESSION_CHUNK_AUTH_H_
