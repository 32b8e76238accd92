// Self-delimiting blocks for allgathers under an agreed capacity
// (GlooGroup::AllgathervBounded): a block starts with its own length, so a
// receiver that posted `capacity` bytes for it learns how many came, and a
// ring forwards only those. Gloo's TCP pairs accept a message shorter than
// the receive posted for it (never a longer one), so no size round is
// needed once every rank holds the same capacity.
//
//   block = [u64 little-endian length of the whole block][payload]
//
// The length counts the header; a valid one lies in
// [kBoundedHeaderBytes, capacity]. Anything else (a short or forged
// message, a slot never written) is refused.
#ifndef GRADWIRE_TRANSPORT_BOUNDED_BLOCK_H_
#define GRADWIRE_TRANSPORT_BOUNDED_BLOCK_H_

#include <cstddef>
#include <cstdint>

#include "gradwire/base/coding.h"

namespace gradwire {
namespace transport {

constexpr size_t kBoundedHeaderBytes = 8;

// Writes `length` (the whole block's bytes) into the block's header.
inline void WriteBoundedHeader(uint8_t* block, uint64_t length) { EncodeFixed64(block, length); }

// The length a received block's header announces if it lies in
// [kBoundedHeaderBytes, capacity], else 0 (invalid). `slot` holds at least
// kBoundedHeaderBytes bytes (capacity >= kBoundedHeaderBytes).
inline uint64_t BoundedBlockLength(const uint8_t* slot, uint64_t capacity) {
  const uint64_t length = DecodeFixed64(slot);
  return length >= kBoundedHeaderBytes && length <= capacity ? length : 0;
}

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_BOUNDED_BLOCK_H_
