#include "gradwire/base/envelope.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's size, for the stream's storage
#include <xxhash.h>

#include <new>

// On x86-64 both the one-shot checksum (every frame a receiver verifies)
// and the streaming update are libxxhash's dispatching ones (AVX2 where the
// CPU has it: about 3x the SSE2 default on bytes in L1, where a stream's
// chunks are); the digest is XXH3's whichever runs.
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <immintrin.h>
#include <xxh_x86dispatch.h>
#define GRADWIRE_XXH3 XXH3_64bits_dispatch
#define GRADWIRE_XXH3_UPDATE XXH3_64bits_update_dispatch
#define GRADWIRE_XXH3_DISPATCH 1
#else
#define GRADWIRE_XXH3 XXH3_64bits
#define GRADWIRE_XXH3_UPDATE XXH3_64bits_update
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"

namespace gradwire {

namespace {

#ifdef GRADWIRE_XXH3_DISPATCH
// libxxhash's AVX2 and AVX-512 paths return without vzeroupper: the upper
// halves of the vector registers stay dirty, and until something clears
// them every legacy-SSE instruction after (all of our code built for the
// x86-64 baseline: its scalar float math, the varint decoder) runs with a
// false dependency on them. Measured on Zen 5: DecodeIndices of a top-k
// 10 % frame, 24 us in a clean state, 67 us after one checksum. So the
// state is cleared after every dispatched call, where the CPU has AVX (the
// only CPUs on which dispatch picks a path that dirties it).
__attribute__((target("avx"))) void ZeroUpperWithAvx() { _mm256_zeroupper(); }

void ClearUpperState() {
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) ZeroUpperWithAvx();
}
#else
void ClearUpperState() {}
#endif

}  // namespace

uint64_t Checksum64(const void* data, size_t n) {
  const uint64_t sum = GRADWIRE_XXH3(data, n);
  ClearUpperState();
  return sum;
}

static_assert(sizeof(XXH3_state_t) <= 576 && alignof(XXH3_state_t) <= 64,
              "StreamingChecksum64::state_ is too small for this xxhash");

StreamingChecksum64::StreamingChecksum64() {
  auto* state = new (state_) XXH3_state_t;
  XXH3_INITSTATE(state);
  XXH3_64bits_reset(state);
}

void StreamingChecksum64::Update(const void* data, size_t n) {
  GRADWIRE_XXH3_UPDATE(reinterpret_cast<XXH3_state_t*>(state_), data, n);
  ClearUpperState();
  bytes_ += n;
}

uint64_t StreamingChecksum64::Digest() const {
  return XXH3_64bits_digest(reinterpret_cast<const XXH3_state_t*>(state_));
}

std::string StartEnvelope(absl::string_view magic, uint32_t version) {
  std::string out(magic);
  PutFixed32(&out, version);
  return out;
}

void SealEnvelope(std::string* out) { PutFixed64(out, Checksum64(*out)); }

absl::StatusOr<Envelope> OpenEnvelope(absl::string_view bytes, absl::string_view magic,
                                      uint32_t min_version, uint32_t max_version,
                                      absl::string_view what) {
  const size_t fixed = magic.size() + 4 + kEnvelopeChecksumBytes;
  if (bytes.size() < fixed || bytes.substr(0, magic.size()) != magic) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bad magic or too short (", bytes.size(),
                                                   " bytes; expected \"", magic, "\" and at least ",
                                                   fixed, ")"));
  }
  const absl::string_view covered = bytes.substr(0, bytes.size() - kEnvelopeChecksumBytes);
  if (DecodeFixed64(bytes.data() + covered.size()) != Checksum64(covered)) {
    return absl::DataLossError(absl::StrCat(what, " checksum mismatch: the bytes are corrupt"));
  }
  Envelope e;
  e.version = DecodeFixed32(bytes.data() + magic.size());
  if (e.version < min_version || e.version > max_version) {
    return absl::InvalidArgumentError(
        min_version == max_version
            ? absl::StrCat(what, " version ", e.version, " is not supported (this build reads ",
                           min_version, ")")
            : absl::StrCat(what, " version ", e.version, " is not supported (this build reads ",
                           min_version, " to ", max_version, ")"));
  }
  e.body = covered.substr(magic.size() + 4);
  return e;
}

}  // namespace gradwire
