// The one checksum every cache format uses: XXH64 (seed 0) from Debian's
// libxxhash. Fast enough to verify on every read, which is the point:
// corrupt bytes are caught where they are served, not where they were written.
#ifndef GRADWIRE_LIB_CACHE_CHECKSUM_H_
#define GRADWIRE_LIB_CACHE_CHECKSUM_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gradwire {
namespace cache {

uint64_t Checksum64(absl::string_view data);

// Checksum64 of the concatenation of everything Update()d, without
// concatenating.
class Checksum64Stream {
 public:
  Checksum64Stream();
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;
  void Update(absl::string_view data);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH64_state_t, kept out of this header
};

// 16 lowercase hex digits, and back (false on anything else).
std::string ChecksumToHex(uint64_t checksum);
bool ChecksumFromHex(absl::string_view hex, uint64_t* checksum);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_CHECKSUM_H_
