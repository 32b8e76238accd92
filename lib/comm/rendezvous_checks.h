// Two checks every rank of a new job makes together, on its connected
// world group, before a Communicator exists (Communicator::ConnectAt, and
// Python's join, lib/python/join.h), so that a misconfigured rank fails the
// whole job at construction instead of at its first exchange:
//   - the job secret: each rank signs a token with its FrameAuthenticator
//     (the secret and the job id) and verifies every rank's token; ranks
//     whose tokens verify for each other hold the same secret;
//   - the settings: "key=value;" text (Communicator::AgreedSettings: the
//     canonical spec, the hierarchy, the dense rule, the exchange; callers
//     add their own, e.g. the DDP hook's warm-up), gathered and compared.
// A mismatch is InvalidArgument "collective mismatch in <what> at
// rendezvous: ..." on every rank, naming the ranks on each side (the
// settings' values too; a secret never leaves its rank).
#ifndef GRADWIRE_LIB_COMM_RENDEZVOUS_CHECKS_H_
#define GRADWIRE_LIB_COMM_RENDEZVOUS_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

// The bucket id the secret check's tokens are signed with; no exchange may
// use it.
inline constexpr uint32_t kJoinBucket = 0xFFFFFFFFu;

// Whether every rank of `world` holds the secret `auth` was made with.
absl::Status CheckSameSecret(transport::GlooGroup& world, const FrameAuthenticator& auth);

// Whether every rank of `world` passed the same `settings` ("key=value;"
// pairs, at most 16 KiB). A key given twice is compared by all its values
// in order.
absl::Status CheckSameSettings(transport::GlooGroup& world, const std::string& settings);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_RENDEZVOUS_CHECKS_H_
