// AES-256-GMAC chunk authentication with OpenSSL 3's EVP interface. Nothing
// here implements cryptography: OpenSSL draws the nonces, computes the
// HMACs and GMACs, and compares tags in constant time (CRYPTO_memcmp).
#include "gradwire/lib/codec/chunk_mac.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gradwire/base/coding.h"

namespace gradwire {
namespace {

// Labels of the values derived from the job secret (FrameAuthenticator::
// KeyedHash hashes each with its NUL), and of the GMAC's input.
constexpr char kKeyLabel[] = "gradwire dense chunk key v1";
constexpr char kConfirmKeyLabel[] = "gradwire dense key confirmation v1";
constexpr char kChunkLabel[] = "gradwire dense chunk v1";
constexpr char kFrameLabel[] = "gradwire frame GMAC v2";

constexpr size_t kIvBytes = 12;  // u32 rank | u64 counter
constexpr size_t kTagBytes = 16;
constexpr size_t kJobBytes = 16;
static_assert(kIvBytes + kTagBytes == ChunkMac::kTrailerBytes, "trailer table");
static_assert(kJobBytes + kTagBytes == ChunkMac::kConfirmationBytes, "confirmation table");

std::string OpenSslError(const char* what) {
  char buf[256] = "no OpenSSL error queued";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::StrCat("chunk auth: ", what, ": ", buf);
}

}  // namespace

struct ChunkMac::CipherState {
  EVP_CIPHER_CTX* keyed = nullptr;  // AES-256-GCM with the session key; copied per call
  uint8_t confirm_key[32] = {};
  std::atomic<uint64_t> seals{0};

  ~CipherState() {
    EVP_CIPHER_CTX_free(keyed);  // OpenSSL cleanses the key schedule
    OPENSSL_cleanse(confirm_key, sizeof(confirm_key));
  }
};

absl::StatusOr<std::array<uint8_t, ChunkMac::kNonceBytes>> ChunkMac::NewNonce() {
  std::array<uint8_t, kNonceBytes> nonce;
  if (RAND_bytes(nonce.data(), nonce.size()) != 1) {
    return absl::InternalError(OpenSslError("RAND_bytes"));
  }
  return nonce;
}

absl::StatusOr<ChunkMac> ChunkMac::Create(const FrameAuthenticator& auth, uint32_t rank,
                                          uint32_t size, absl::Span<const uint8_t> nonces) {
  if (size == 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("chunk auth: bad rank ", rank, " of ", size));
  }
  if (nonces.size() != uint64_t{size} * kNonceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk auth: ", nonces.size(), " bytes of nonces for ", size, " ranks"));
  }
  uint8_t ranks[4];
  EncodeFixed32(ranks, size);
  auto state = std::make_unique<CipherState>();
  uint8_t key[32];
  absl::Status s = auth.KeyedHash(
      kKeyLabel, {absl::MakeConstSpan(auth.job_fingerprint()), absl::MakeConstSpan(ranks), nonces},
      key);
  if (s.ok()) {
    s = auth.KeyedHash(kConfirmKeyLabel, {absl::MakeConstSpan(ranks), nonces}, state->confirm_key);
  }
  if (s.ok()) {
    state->keyed = EVP_CIPHER_CTX_new();
    if (state->keyed == nullptr ||
        EVP_EncryptInit_ex2(state->keyed, EVP_aes_256_gcm(), key, nullptr, nullptr) != 1) {
      s = absl::InternalError(OpenSslError("AES-256-GCM key setup"));
    }
  }
  OPENSSL_cleanse(key, sizeof(key));
  if (!s.ok()) return s;
  ChunkMac mac(std::move(state), rank, size);
  std::memcpy(mac.confirmation_.data(), auth.job_fingerprint().data(), kJobBytes);
  if (absl::Status c =
          mac.ConfirmationTag(rank, mac.confirmation_.data(), mac.confirmation_.data() + kJobBytes);
      !c.ok()) {
    return c;
  }
  return mac;
}

ChunkMac::ChunkMac(std::unique_ptr<CipherState> cipher, uint32_t rank, uint32_t size)
    : cipher_(std::move(cipher)), rank_(rank), size_(size), confirmation_() {}

ChunkMac::ChunkMac(ChunkMac&&) noexcept = default;
ChunkMac& ChunkMac::operator=(ChunkMac&&) noexcept = default;
ChunkMac::~ChunkMac() = default;

absl::Status ChunkMac::ConfirmationTag(uint32_t rank, const uint8_t* job, uint8_t tag[16]) const {
  uint8_t message[kJobBytes + 4];
  std::memcpy(message, job, kJobBytes);
  EncodeFixed32(message + kJobBytes, rank);
  uint8_t mac[32];
  size_t mac_len = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, cipher_->confirm_key,
                sizeof(cipher_->confirm_key), message, sizeof(message), mac, sizeof(mac),
                &mac_len) == nullptr ||
      mac_len != sizeof(mac)) {
    return absl::InternalError(OpenSslError("HMAC-SHA256 of a key confirmation"));
  }
  std::memcpy(tag, mac, kTagBytes);
  return absl::OkStatus();
}

absl::Status ChunkMac::CheckConfirmations(absl::Span<const uint8_t> confirmations,
                                          absl::Span<const int> names) const {
  if (confirmations.size() != uint64_t{size_} * kConfirmationBytes || names.size() != size_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk auth: ", confirmations.size(),
                                                   " bytes of confirmations and ", names.size(),
                                                   " names for ", size_, " ranks"));
  }
  std::vector<int> forged, other_job;
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const uint8_t* c = confirmations.data() + uint64_t{r} * kConfirmationBytes;
    uint8_t tag[kTagBytes];
    if (absl::Status s = ConfirmationTag(r, c, tag); !s.ok()) return s;
    if (CRYPTO_memcmp(tag, c + kJobBytes, kTagBytes) != 0) {
      forged.push_back(names[r]);
    } else if (std::memcmp(c, confirmation_.data(), kJobBytes) != 0) {
      other_job.push_back(names[r]);  // authentic: the same secret, another job id
    }
  }
  if (!forged.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "dense key round: the key confirmation of rank(s) [", absl::StrJoin(forged, ", "),
        "] does not verify under rank ", names[rank_],
        "'s job secret: one side holds another secret (compare $GRADWIRE_JOB_SECRET or "
        "--job_secret_file on these ranks), or the key round was altered in transit"));
  }
  if (!other_job.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "dense key round: rank(s) [", absl::StrJoin(other_job, ", "), "] hold this job's secret ",
        "but another job id than rank ", names[rank_], ": two jobs share a secret"));
  }
  return absl::OkStatus();
}

absl::Status ChunkMac::Tag(Domain domain, const uint8_t iv[12], absl::Span<const uint8_t> context,
                           absl::Span<const uint8_t> chunk, uint8_t tag[16]) const {
  const char* label = domain == Domain::kFrame ? kFrameLabel : kChunkLabel;
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  uint8_t lengths[16];
  EncodeFixed64(lengths, context.size());
  EncodeFixed64(lengths + 8, chunk.size());
  // GMAC is GCM with everything as additional data: the domain's label, both
  // lengths (so the context/chunk boundary is unambiguous), the context,
  // the chunk. EVP takes int lengths: long chunks go in pieces.
  auto aad = [ctx](const uint8_t* p, size_t n) {
    while (n > 0) {
      const int piece = static_cast<int>(std::min<size_t>(n, size_t{1} << 30));
      int out_len = 0;
      if (EVP_EncryptUpdate(ctx, nullptr, &out_len, p, piece) != 1) return false;
      p += piece;
      n -= piece;
    }
    return true;
  };
  int final_len = 0;
  uint8_t none[16];
  const bool ok = ctx != nullptr && EVP_CIPHER_CTX_copy(ctx, cipher_->keyed) == 1 &&
                  EVP_EncryptInit_ex2(ctx, nullptr, nullptr, iv, nullptr) == 1 &&
                  aad(reinterpret_cast<const uint8_t*>(label), std::strlen(label) + 1) &&
                  aad(lengths, sizeof(lengths)) && aad(context.data(), context.size()) &&
                  aad(chunk.data(), chunk.size()) &&
                  EVP_EncryptFinal_ex(ctx, none, &final_len) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kTagBytes, tag) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return absl::InternalError(OpenSslError("AES-256-GMAC"));
  return absl::OkStatus();
}

absl::Status ChunkMac::SealIn(Domain domain, absl::Span<const uint8_t> context,
                              absl::Span<const uint8_t> chunk, uint8_t* trailer) const {
  const uint64_t counter = cipher_->seals.fetch_add(1, std::memory_order_relaxed);
  if (counter == ~uint64_t{0}) {
    return absl::InternalError("chunk auth: the session's 2^64 - 1 IVs are used up");
  }
  EncodeFixed32(trailer, rank_);
  EncodeFixed64(trailer + 4, counter);
  return Tag(domain, trailer, context, chunk, trailer + kIvBytes);
}

absl::Status ChunkMac::VerifyIn(Domain domain, absl::Span<const uint8_t> context,
                                absl::Span<const uint8_t> chunk, const uint8_t* trailer) const {
  uint8_t tag[kTagBytes];
  if (absl::Status s = Tag(domain, trailer, context, chunk, tag); !s.ok()) return s;
  if (CRYPTO_memcmp(tag, trailer + kIvBytes, kTagBytes) != 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("chunk auth: MAC mismatch on a ", chunk.size(), "-byte ",
                     domain == Domain::kFrame ? "frame" : "chunk",
                     ": altered in transit, sealed with another job secret or session, or "
                     "replayed from another call or ring position"));
  }
  return absl::OkStatus();
}

absl::Status ChunkMac::Seal(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                            uint8_t* trailer) const {
  return SealIn(Domain::kDenseChunk, context, chunk, trailer);
}

absl::Status ChunkMac::Verify(absl::Span<const uint8_t> context, absl::Span<const uint8_t> chunk,
                              const uint8_t* trailer) const {
  return VerifyIn(Domain::kDenseChunk, context, chunk, trailer);
}

absl::Status ChunkMac::SealFrame(absl::Span<const uint8_t> fields, absl::Span<const uint8_t> frame,
                                 uint8_t* trailer) const {
  return SealIn(Domain::kFrame, fields, frame, trailer);
}

absl::Status ChunkMac::VerifyFrame(absl::Span<const uint8_t> fields,
                                   absl::Span<const uint8_t> frame, const uint8_t* trailer) const {
  return VerifyIn(Domain::kFrame, fields, frame, trailer);
}

}  // namespace gradwire
