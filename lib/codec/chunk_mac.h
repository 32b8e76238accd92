// Chunk authentication for dense exchanges: AES-256-GMAC under a key that
// is fresh for every session (one Communicator) and derived from the job
// secret.
//
// Dense buffers (method "none", the small and 1-D tensors compressed jobs
// keep exact, the hierarchical exchange's intra-node stages) travel as
// plain fp32 in a ring of chunks (transport/sealed_ring.h). Each chunk
// carries a trailer that authenticates its bytes together with a context
// the transport writes (who sealed it, for which call, phase, ring step
// and segment): a chunk from a host without the secret, from another job,
// another session, another call or another position in the ring fails to
// verify. HMAC-SHA256, which signs compressed frames (frame_auth.h), runs
// at ~2.1 GB/s per core on this project's machines; GMAC at ~10 GB/s
// (AES-NI + PCLMULQDQ; docs/communicator.md, "Authenticated dense
// exchange", has the measurements), and a dense ResNet-50 step seals and
// verifies ~250 MB per rank.
//
// GMAC must never see one IV twice under one key. The key is fresh per
// session and the IV is (sealing rank, a counter of that rank's seals in
// this session), so IVs never repeat while every rank holds a distinct
// rank number:
//   1. Key round: every rank draws NewNonce() and the ranks allgather
//      them (any transport; the nonces are public).
//   2. Create(): session key = HMAC-SHA256(job secret, label | job
//      fingerprint | ranks | every rank's nonce), and a confirmation key
//      the same way without the job. A rank's own nonce is random, so its
//      keys are new even if an attacker replays every other nonce of an
//      earlier session.
//   3. Confirmation round: every rank allgathers Confirmation() and calls
//      CheckConfirmations(): a rank holding another secret (or another job
//      id, or a different view of the nonces) is found here, on every rank,
//      before any gradient moves.
// Byte layout: docs/wire_format.md, "Dense chunk trailer".
//
// The same session key also signs the compressed frames of the session's
// exchanges (SealFrame / VerifyFrame, used by session_frame_auth.h): their
// tags carry another label, so a frame's tag never verifies as a chunk's
// or the reverse, and frames and chunks draw their IVs from one counter.
//
// Thread-safe: Seal and Verify are const and use a private cipher context
// per call (the seal counter is atomic).
#ifndef GRADWIRE_LIB_CODEC_CHUNK_MAC_H_
#define GRADWIRE_LIB_CODEC_CHUNK_MAC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/frame_auth.h"

namespace gradwire {

class ChunkMac {
 public:
  // One rank's contribution to the key round.
  static constexpr size_t kNonceBytes = 16;
  // One rank's key confirmation: its job fingerprint, then a 16-byte tag.
  static constexpr size_t kConfirmationBytes = 32;
  // What Seal writes behind a chunk: IV (u32 sealing rank, u64 counter),
  // then the 16-byte GMAC tag.
  static constexpr size_t kTrailerBytes = 28;

  // A fresh random nonce (OpenSSL's CSPRNG). Internal if it fails.
  static absl::StatusOr<std::array<uint8_t, kNonceBytes>> NewNonce();

  // The session of rank `rank` of `size`: `nonces` holds every rank's
  // nonce in rank order (size x kNonceBytes). InvalidArgument for a bad
  // rank or table; Internal if OpenSSL fails.
  static absl::StatusOr<ChunkMac> Create(const FrameAuthenticator& auth, uint32_t rank,
                                         uint32_t size, absl::Span<const uint8_t> nonces);

  ChunkMac(ChunkMac&&) noexcept;
  ChunkMac& operator=(ChunkMac&&) noexcept;
  ~ChunkMac();

  uint32_t rank() const { return rank_; }

  // What this rank sends in the confirmation round.
  const std::array<uint8_t, kConfirmationBytes>& Confirmation() const { return confirmation_; }

  // Checks every rank's confirmation (size x kConfirmationBytes, rank
  // order; this rank's own is skipped). `names[r]` is how errors name rank
  // r (its world rank). Unauthenticated naming every rank whose tag does
  // not verify (another job secret, or a different view of the key round);
  // else PermissionDenied naming the ranks with another job id (same
  // secret: two jobs share it); else OK. Every rank sees the same
  // confirmations, so every rank reaches the same verdict about the others.
  absl::Status CheckConfirmations(absl::Span<const uint8_t> confirmations,
                                  absl::Span<const int> names) const;

  // Writes kTrailerBytes at `trailer` authenticating `context` (bytes the
  // caller defines; bound, not sent) and `chunk`. Internal if OpenSSL
  // fails or the seal counter is exhausted.
  absl::Status Seal(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                    uint8_t* trailer) const;

  // OK iff `trailer` authenticates `context` and `chunk` under this
  // session's key; Unauthenticated otherwise (altered in flight, another
  // secret, session or context). Compares in constant time.
  absl::Status Verify(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                      const uint8_t* trailer) const;

  // Seal and Verify for a compressed frame, whose authentication trailer's
  // `fields` (docs/wire_format.md) are the context; under the frame label.
  absl::Status SealFrame(absl::Span<const uint8_t> fields, absl::Span<const uint8_t> frame,
                         uint8_t* trailer) const;
  absl::Status VerifyFrame(absl::Span<const uint8_t> fields, absl::Span<const uint8_t> frame,
                           const uint8_t* trailer) const;

 private:
  struct CipherState;  // OpenSSL objects and the seal counter

  // What a tag authenticates: each has its own label in the GMAC's input.
  enum class Domain { kDenseChunk, kFrame };

  ChunkMac(std::unique_ptr<CipherState> cipher, uint32_t rank, uint32_t size);

  absl::Status SealIn(Domain domain, absl::Span<const uint8_t> context,
                      absl::Span<const uint8_t> chunk, uint8_t* trailer) const;
  absl::Status VerifyIn(Domain domain, absl::Span<const uint8_t> context,
                        absl::Span<const uint8_t> chunk, const uint8_t* trailer) const;
  // The 16-byte tag of (domain label, iv, context, chunk).
  absl::Status Tag(Domain domain, const uint8_t iv[12], absl::Span<const uint8_t> context,
                   absl::Span<const uint8_t> chunk, uint8_t tag[16]) const;
  // Rank `rank`'s confirmation tag under job fingerprint `job`.
  absl::Status ConfirmationTag(uint32_t rank, const uint8_t* job, uint8_t tag[16]) const;

  std::unique_ptr<CipherState> cipher_;
  uint32_t rank_;
  uint32_t size_;
  std::array<uint8_t, kConfirmationBytes> confirmation_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_CHUNK_MAC_H_
