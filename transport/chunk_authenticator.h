// What a sealed collective (transport/sealed_ring.h) needs from its caller
// to authenticate chunks, and what it binds into each chunk's tag.
//
// The transport knows no MAC: its caller (lib/comm, from the job secret)
// supplies a ChunkAuthenticator that seals a chunk -- writes a trailer
// authenticating the chunk's bytes together with a context -- and verifies
// one. The context is bytes the transport composes (SealedChunkContext
// below): who sealed the chunk, for which collective of which group, at
// which phase, ring step, chunk and segment, under the caller's ChunkScope
// (step, bucket, stage). It is bound into the tag, not sent: the receiver
// rebuilds the context it expects, so a chunk replayed from another call,
// moved to another ring position or attributed to another rank fails to
// verify.
#ifndef GRADWIRE_TRANSPORT_CHUNK_AUTHENTICATOR_H_
#define GRADWIRE_TRANSPORT_CHUNK_AUTHENTICATOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace gradwire {
namespace transport {

class ChunkAuthenticator {
 public:
  virtual ~ChunkAuthenticator() = default;

  // Bytes Seal writes behind each chunk (the same on every rank of a job).
  virtual size_t trailer_bytes() const = 0;

  // Writes trailer_bytes() at `trailer`, authenticating `context` and
  // `chunk`. A failure (the MAC library failed) ends the collective.
  virtual absl::Status Seal(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                            uint8_t* trailer) const = 0;

  // OK iff `trailer` authenticates `context` and `chunk`; otherwise
  // Unauthenticated saying why (the transport adds who sent it and where
  // in the ring).
  virtual absl::Status Verify(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                              const uint8_t* trailer) const = 0;
};

// The caller's name for one sealed collective, bound into every chunk's
// tag: whatever keeps its calls apart (the communicator passes the
// training step, the bucket, and which of its exchanges of the bucket this
// is). The group adds its own collective number, so even two calls with
// one scope never accept each other's chunks.
struct ChunkScope {
  uint64_t step = 0;
  uint32_t bucket = 0;
  uint32_t stage = 0;
};

// The context bytes of one chunk (docs/wire_format.md, "Dense chunk
// context"): 64 bytes, little endian.
struct SealedChunkContext {
  static constexpr size_t kBytes = 64;
  static constexpr uint32_t kMagic = 0x31524747;  // bytes "GGR1"
  enum Phase : uint32_t {
    kPartialSum = 1,  // reduce-scatter: a partial sum, sealed by the rank that sent it
    kFinalChunk = 2,  // allgather: a finished chunk, sealed once by its owner and forwarded
    // A caller's own message sealed with the same key outside a sealed
    // collective (lib/comm/cast_allreduce.h: one rank's values for one
    // region, sent straight to its owner): call 0, ring_step 0.
    kDirectMessage = 3,
  };

  uint32_t call = 0;  // the group's collective number (the same on every rank)
  ChunkScope scope;
  uint32_t group_size = 0;
  uint32_t phase = 0;
  uint32_t sealer = 0;     // world rank that sealed it
  uint32_t ring_step = 0;  // reduce-scatter step; 0 for allgather chunks (forwarded as sealed)
  uint32_t chunk = 0;      // which of the group_size chunks
  uint32_t segment = 0;    // which segment of the chunk
  uint64_t offset = 0;     // first element of the segment in the buffer
  uint64_t elements = 0;   // elements in the segment

  // Writes kBytes at `out`.
  void EncodeTo(uint8_t* out) const;
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_CHUNK_AUTHENTICATOR_H_
