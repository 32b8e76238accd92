// HMAC-SHA256 frame authentication with OpenSSL 3's EVP_MAC. Nothing here
// implements cryptography: OpenSSL computes the MAC and the fingerprint
// hash, and compares tags in constant time (CRYPTO_memcmp).
#include "gradwire/lib/codec/frame_auth.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace {

// Trailer fields, behind the tag (docs/wire_format.md).
constexpr uint32_t kAuthMagic = 0x31415747;  // bytes "GWA1"
constexpr uint8_t kAuthVersion = 1;
constexpr size_t kMagicAt = 0;
constexpr size_t kVersionAt = 4;
constexpr size_t kTagBytesAt = 5;
constexpr size_t kReservedAt = 6;
constexpr size_t kRankAt = 8;
constexpr size_t kBucketAt = 12;
constexpr size_t kStepAt = 16;
constexpr size_t kJobAt = 24;
constexpr size_t kJobBytes = 16;
static_assert(kJobAt + kJobBytes == frame_auth_internal::kFieldBytes, "trailer table");

constexpr size_t kHmacBytes = 32;

// Domain separation: the same secret may key other gradwire MACs later;
// a label makes a tag for one purpose useless for any other.
constexpr char kMacLabel[] = "gradwire frame MAC v1";  // hashed with its NUL
constexpr char kJobLabel[] = "gradwire job id v1";

std::string OpenSslError(absl::string_view what) {
  char buf[256] = "no OpenSSL error queued";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::StrCat("frame auth: ", what, ": ", buf);
}

std::string HexBytes(absl::Span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

constexpr char kHowToMakeOne[] = "generate one with: openssl rand -hex 32";

// A refused secret's error: where it came from and why, never its bytes.
absl::Status Refuse(absl::string_view origin, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("job secret from ", origin, " ", why, " (", kHowToMakeOne, ")"));
}

// The newline `echo` or an editor leaves, and any other trailing
// whitespace (so a value of whitespace alone strips to nothing).
absl::string_view StripTrailingWhitespace(absl::string_view v) {
  const size_t last = v.find_last_not_of(" \t\n\v\f\r");
  return last == absl::string_view::npos ? absl::string_view() : v.substr(0, last + 1);
}

}  // namespace

// ------------------------------------------------------------ JobSecret

absl::StatusOr<JobSecret> JobSecret::FromValue(absl::string_view value, absl::string_view origin) {
  if (value.empty()) return Refuse(origin, "is empty");
  const absl::string_view v = StripTrailingWhitespace(value);
  if (v.empty()) {
    return Refuse(origin, absl::StrCat("is only whitespace (", value.size(), " bytes)"));
  }
  if (v.size() < kMinBytes) {
    return Refuse(origin,
                  absl::StrCat("is ", v.size(), " bytes; at least ", kMinBytes, " are required"));
  }
  // Long enough but one byte repeated (16 NUL bytes, a run of one key): a
  // key an attacker guesses in at most 256 tries.
  if (v.find_first_not_of(v[0]) == absl::string_view::npos) {
    return Refuse(origin,
                  absl::StrCat("is ", v.size(), " copies of one byte value: it can be guessed"));
  }
  return JobSecret(std::string(v));
}

absl::StatusOr<JobSecret> JobSecret::FromEnvironment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat("environment variable ", name, " is not set"));
  }
  return FromValue(value, absl::StrCat("$", name));
}

absl::StatusOr<JobSecret> JobSecret::FromFile(const std::string& path) {
  const std::string origin = absl::StrCat("file '", path, "'");
  // O_NONBLOCK: opening a FIFO must not wait for a writer, nor reading
  // one (or a terminal) wait forever; a regular file ignores it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string msg =
        absl::StrCat("cannot open job secret file '", path, "': ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("job secret file '", path, "' is a directory"));
  }
  // Read one byte past the cap to tell "exactly at the cap" from "larger".
  // A pipe (bash's <(...), a FIFO) or a device may make the reader wait
  // for data: at most kFileReadTimeoutMs in all.
  std::string bytes(kMaxFileBytes + 1, '\0');
  size_t got = 0;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(kFileReadTimeoutMs);
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
        struct pollfd pfd = {fd, POLLIN, 0};
        if (left > 0 && (::poll(&pfd, 1, static_cast<int>(left)) > 0 || errno == EINTR)) {
          continue;
        }
        ::close(fd);
        OPENSSL_cleanse(&bytes[0], bytes.size());
        return absl::DeadlineExceededError(
            absl::StrCat("job secret file '", path, "' gave no end of file within ",
                         kFileReadTimeoutMs, " ms (a FIFO or device nobody writes?)"));
      }
      const int err = errno;
      ::close(fd);
      OPENSSL_cleanse(&bytes[0], bytes.size());
      return absl::InternalError(
          absl::StrCat("cannot read job secret file '", path, "': ", std::strerror(err)));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > kMaxFileBytes) {
    OPENSSL_cleanse(&bytes[0], bytes.size());
    return absl::InvalidArgumentError(absl::StrCat("job secret file '", path, "' is larger than ",
                                                   kMaxFileBytes, " bytes: is it the right file?"));
  }
  absl::StatusOr<JobSecret> secret = FromValue(absl::string_view(bytes.data(), got), origin);
  OPENSSL_cleanse(&bytes[0], bytes.size());
  return secret;
}

absl::StatusOr<JobSecret> JobSecret::Resolve(absl::string_view flag_value,
                                             absl::string_view flag_file) {
  if (!flag_value.empty()) return FromValue(flag_value, "--job_secret");
  if (!flag_file.empty()) return FromFile(std::string(flag_file));
  absl::StatusOr<JobSecret> env = FromEnvironment(kJobSecretEnv);
  if (absl::IsNotFound(env.status())) {
    const char* file = std::getenv(kJobSecretFileEnv);
    if (file != nullptr && *file != '\0') return FromFile(file);
    return absl::FailedPreconditionError(
        absl::StrCat("no job secret: set $", kJobSecretFileEnv, " (a file holding it) or $",
                     kJobSecretEnv, ", or give one: a tool's --job_secret_file=PATH (or ",
                     "--job_secret, visible in ps; avoid), a program's JobSecret::FromFile"));
  }
  return env;
}

JobSecret::JobSecret(JobSecret&& other) noexcept : bytes_(std::move(other.bytes_)) { other.Wipe(); }

JobSecret& JobSecret::operator=(JobSecret&& other) noexcept {
  if (this != &other) {
    Wipe();
    bytes_ = std::move(other.bytes_);
    other.Wipe();
  }
  return *this;
}

JobSecret::~JobSecret() { Wipe(); }

void JobSecret::Wipe() {
  if (!bytes_.empty()) OPENSSL_cleanse(&bytes_[0], bytes_.size());
  bytes_.clear();
}

// --------------------------------------------------- FrameAuthenticator

struct FrameAuthenticator::MacState {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;  // initialised with the key; dup'd per call

  ~MacState() {
    EVP_MAC_CTX_free(keyed);  // OpenSSL cleanses the key it holds
    EVP_MAC_free(mac);
  }
};

absl::StatusOr<FrameAuthenticator> FrameAuthenticator::Create(const JobSecret& secret,
                                                              absl::string_view job_id,
                                                              size_t tag_bytes) {
  if (tag_bytes != 16 && tag_bytes != 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame auth: tag size ", tag_bytes, " bytes; must be 16 or 32"));
  }
  if (job_id.empty()) {
    return absl::InvalidArgumentError("frame auth: job id is empty");
  }
  // Moved-from secrets are empty: refuse rather than key a MAC with "".
  if (secret.bytes_.size() < JobSecret::kMinBytes) {
    return absl::InvalidArgumentError("frame auth: job secret is empty (moved from?)");
  }

  auto state = std::make_unique<MacState>();
  state->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (state->mac == nullptr) return absl::InternalError(OpenSslError("EVP_MAC_fetch(HMAC)"));
  state->keyed = EVP_MAC_CTX_new(state->mac);
  if (state->keyed == nullptr) return absl::InternalError(OpenSslError("EVP_MAC_CTX_new"));
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_init(state->keyed, reinterpret_cast<const unsigned char*>(secret.bytes_.data()),
                   secret.bytes_.size(), params) != 1) {
    return absl::InternalError(OpenSslError("EVP_MAC_init(HMAC-SHA256)"));
  }

  // The job travels as a fingerprint: fixed size, and enough to tell
  // "another job" from "forged" once the tag has been checked.
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int hash_len = 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  const bool hashed = md != nullptr && EVP_DigestInit_ex(md, EVP_sha256(), nullptr) == 1 &&
                      EVP_DigestUpdate(md, kJobLabel, sizeof(kJobLabel)) == 1 &&
                      EVP_DigestUpdate(md, job_id.data(), job_id.size()) == 1 &&
                      EVP_DigestFinal_ex(md, hash, &hash_len) == 1;
  EVP_MD_CTX_free(md);
  if (!hashed || hash_len < kJobBytes) {
    return absl::InternalError(OpenSslError("SHA-256 of the job id"));
  }
  std::array<uint8_t, 16> fingerprint;
  std::memcpy(fingerprint.data(), hash, kJobBytes);
  return FrameAuthenticator(std::move(state), std::string(job_id), fingerprint, tag_bytes);
}

FrameAuthenticator::FrameAuthenticator(std::unique_ptr<MacState> mac, std::string job_id,
                                       std::array<uint8_t, 16> job_fingerprint, size_t tag_bytes)
    : mac_(std::move(mac)),
      job_id_(std::move(job_id)),
      job_fingerprint_(job_fingerprint),
      tag_bytes_(tag_bytes) {}

FrameAuthenticator::FrameAuthenticator(FrameAuthenticator&&) noexcept = default;
FrameAuthenticator& FrameAuthenticator::operator=(FrameAuthenticator&&) noexcept = default;
FrameAuthenticator::~FrameAuthenticator() = default;

absl::Status FrameAuthenticator::KeyedHash(const char* label,
                                           std::initializer_list<absl::Span<const uint8_t>> parts,
                                           uint8_t out[32]) const {
  // A copy of the keyed context per call keeps Sign/Verify const and
  // thread-safe, and skips re-deriving the HMAC key pads each time.
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(mac_->keyed);
  if (ctx == nullptr) return absl::InternalError(OpenSslError("EVP_MAC_CTX_dup"));
  bool ok = EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(label),
                           std::strlen(label) + 1) == 1;
  for (absl::Span<const uint8_t> part : parts) {
    ok = ok && (part.empty() || EVP_MAC_update(ctx, part.data(), part.size()) == 1);
  }
  size_t out_len = 0;
  ok = ok && EVP_MAC_final(ctx, out, &out_len, kHmacBytes) == 1 && out_len == kHmacBytes;
  EVP_MAC_CTX_free(ctx);
  if (!ok) return absl::InternalError(OpenSslError("HMAC-SHA256"));
  return absl::OkStatus();
}

absl::Status FrameAuthenticator::ComputeMac(absl::Span<const uint8_t> frame, const uint8_t* fields,
                                            uint8_t out[32]) const {
  uint8_t length[8];
  EncodeFixed64(length, frame.size());
  // The frame length is hashed before the frame so that the boundary
  // between frame and trailer fields is unambiguous.
  return KeyedHash(
      kMacLabel,
      {absl::MakeConstSpan(length), frame, absl::MakeConstSpan(fields, kTrailerFieldBytes)}, out);
}

namespace frame_auth_internal {

absl::Status CheckRoom(absl::Span<uint8_t> buffer, size_t frame_bytes, size_t trailer_bytes) {
  if (frame_bytes > buffer.size() || buffer.size() - frame_bytes < trailer_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame auth: buffer of ", buffer.size(), " bytes has no room for a ", frame_bytes,
        "-byte frame and its ", trailer_bytes, "-byte authentication trailer"));
  }
  return absl::OkStatus();
}

void WriteFields(uint8_t version, uint8_t tag_bytes, const FrameOrigin& origin,
                 const std::array<uint8_t, 16>& job, uint8_t* fields) {
  EncodeFixed32(fields + kMagicAt, kAuthMagic);
  fields[kVersionAt] = version;
  fields[kTagBytesAt] = tag_bytes;
  EncodeFixed16(fields + kReservedAt, 0);
  EncodeFixed32(fields + kRankAt, origin.sender_rank);
  EncodeFixed32(fields + kBucketAt, origin.bucket);
  EncodeFixed64(fields + kStepAt, origin.step);
  std::memcpy(fields + kJobAt, job.data(), kJobBytes);
}

absl::Status CheckStructure(absl::Span<const uint8_t> authenticated, size_t trailer_bytes,
                            uint8_t version, uint8_t tag_bytes) {
  if (authenticated.size() < trailer_bytes) {
    return absl::UnauthenticatedError(absl::StrCat("frame auth: ", authenticated.size(),
                                                   " bytes cannot carry the ", trailer_bytes,
                                                   "-byte authentication trailer"));
  }
  // These fields are not yet authentic: they only choose the error
  // message, never what is accepted.
  const uint8_t* fields = authenticated.data() + authenticated.size() - kFieldBytes;
  const uint32_t magic = DecodeFixed32(fields + kMagicAt);
  if (magic != kAuthMagic) {
    return absl::UnauthenticatedError(absl::StrCat(
        "frame auth: no authentication trailer (magic 0x", absl::Hex(magic, absl::kZeroPad8),
        ", expected 0x", absl::Hex(kAuthMagic, absl::kZeroPad8),
        "): sender has authentication off, or not a gradwire peer"));
  }
  if (fields[kVersionAt] != version) {
    return absl::UnauthenticatedError(absl::StrCat(
        "frame auth: trailer version ", fields[kVersionAt], ", this receiver verifies version ",
        version, " (1: HMAC-SHA256 under the job secret, 2: GMAC under the session's key)"));
  }
  if (fields[kTagBytesAt] != tag_bytes) {
    return absl::UnauthenticatedError(absl::StrCat("frame auth: tag of ", fields[kTagBytesAt],
                                                   " bytes, this job uses ", tag_bytes));
  }
  if (DecodeFixed16(fields + kReservedAt) != 0) {
    return absl::UnauthenticatedError("frame auth: reserved trailer bits are set");
  }
  return absl::OkStatus();
}

absl::Status CheckOrigin(const uint8_t* fields, const std::array<uint8_t, 16>& job,
                         absl::string_view job_id, const FrameOrigin& expected) {
  // Authentic from here on: a mismatch is a frame the job's own secret
  // signed, but for another job, rank, bucket or step.
  if (std::memcmp(fields + kJobAt, job.data(), kJobBytes) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("frame auth: frame belongs to another job (job fingerprint ",
                     HexBytes(absl::MakeConstSpan(fields + kJobAt, kJobBytes)), ", job '", job_id,
                     "' is ", HexBytes(job), "): two jobs share a secret"));
  }
  const uint32_t rank = DecodeFixed32(fields + kRankAt);
  if (rank != expected.sender_rank) {
    return absl::PermissionDeniedError(absl::StrCat("frame auth: frame signed by rank ", rank,
                                                    ", expected rank ", expected.sender_rank));
  }
  const uint32_t bucket = DecodeFixed32(fields + kBucketAt);
  if (bucket != expected.bucket) {
    return absl::PermissionDeniedError(absl::StrCat("frame auth: frame is for bucket ", bucket,
                                                    ", expected bucket ", expected.bucket));
  }
  const uint64_t step = DecodeFixed64(fields + kStepAt);
  if (step < expected.step) {
    return absl::PermissionDeniedError(absl::StrCat(
        "frame auth: replayed or stale frame from step ", step, ", expected step ", expected.step));
  }
  if (step > expected.step) {
    return absl::PermissionDeniedError(absl::StrCat("frame auth: frame from step ", step,
                                                    " is ahead of expected step ", expected.step));
  }
  return absl::OkStatus();
}

}  // namespace frame_auth_internal

absl::StatusOr<size_t> FrameAuthenticator::Sign(absl::Span<uint8_t> buffer, size_t frame_bytes,
                                                const FrameOrigin& origin) const {
  GRADWIRE_RETURN_IF_ERROR(frame_auth_internal::CheckRoom(buffer, frame_bytes, trailer_bytes()));
  uint8_t* tag = buffer.data() + frame_bytes;
  uint8_t* fields = tag + tag_bytes_;
  frame_auth_internal::WriteFields(kAuthVersion, static_cast<uint8_t>(tag_bytes_), origin,
                                   job_fingerprint_, fields);
  uint8_t mac[kHmacBytes];
  if (absl::Status s = ComputeMac(buffer.first(frame_bytes), fields, mac); !s.ok()) return s;
  std::memcpy(tag, mac, tag_bytes_);
  return frame_bytes + trailer_bytes();
}

absl::StatusOr<absl::Span<const uint8_t>> FrameAuthenticator::Verify(
    absl::Span<const uint8_t> authenticated, const FrameOrigin& expected) const {
  GRADWIRE_RETURN_IF_ERROR(frame_auth_internal::CheckStructure(
      authenticated, trailer_bytes(), kAuthVersion, static_cast<uint8_t>(tag_bytes_)));
  const uint8_t* fields = authenticated.data() + authenticated.size() - kTrailerFieldBytes;
  const absl::Span<const uint8_t> frame =
      authenticated.first(authenticated.size() - trailer_bytes());
  const uint8_t* tag = frame.data() + frame.size();
  uint8_t mac[kHmacBytes];
  if (absl::Status s = ComputeMac(frame, fields, mac); !s.ok()) return s;
  if (CRYPTO_memcmp(mac, tag, tag_bytes_) != 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("frame auth: MAC mismatch on a ", frame.size(),
                     "-byte frame: altered in transit, or signed with a different job secret"));
  }
  GRADWIRE_RETURN_IF_ERROR(
      frame_auth_internal::CheckOrigin(fields, job_fingerprint_, job_id_, expected));
  return frame;
}

}  // namespace gradwire
