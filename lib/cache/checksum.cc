#include "gradwire/lib/cache/checksum.h"

#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace gradwire {
namespace cache {

uint64_t Checksum64(absl::string_view data) { return XXH64(data.data(), data.size(), 0); }

Checksum64Stream::Checksum64Stream() : state_(XXH64_createState()) {
  XXH64_reset(static_cast<XXH64_state_t*>(state_), 0);
}
Checksum64Stream::~Checksum64Stream() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }
void Checksum64Stream::Update(absl::string_view data) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), data.data(), data.size());
}
uint64_t Checksum64Stream::Digest() const {
  return XXH64_digest(static_cast<const XXH64_state_t*>(state_));
}

std::string ChecksumToHex(uint64_t checksum) { return absl::StrFormat("%016x", checksum); }

bool ChecksumFromHex(absl::string_view hex, uint64_t* checksum) {
  if (hex.size() != 16) return false;
  uint64_t value = 0;
  for (char c : hex) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  *checksum = value;
  return true;
}

}  // namespace cache
}  // namespace gradwire
