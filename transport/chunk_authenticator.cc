#include "gradwire/transport/chunk_authenticator.h"

#include "gradwire/base/coding.h"

namespace gradwire {
namespace transport {

void SealedChunkContext::EncodeTo(uint8_t* out) const {
  EncodeFixed32(out + 0, kMagic);
  EncodeFixed32(out + 4, call);
  EncodeFixed64(out + 8, scope.step);
  EncodeFixed32(out + 16, scope.bucket);
  EncodeFixed32(out + 20, scope.stage);
  EncodeFixed32(out + 24, group_size);
  EncodeFixed32(out + 28, phase);
  EncodeFixed32(out + 32, sealer);
  EncodeFixed32(out + 36, ring_step);
  EncodeFixed32(out + 40, chunk);
  EncodeFixed32(out + 44, segment);
  EncodeFixed64(out + 48, offset);
  EncodeFixed64(out + 56, elements);
  static_assert(56 + 8 == kBytes, "context table");
}

}  // namespace transport
}  // namespace gradwire
