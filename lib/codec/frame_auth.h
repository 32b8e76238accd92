// Frame authentication: a keyed MAC that binds a frame to its job, sender
// rank, step and bucket.
//
// Two MACs sign frames behind one interface (FrameSigner): the job-long
// HMAC-SHA256 here, which needs nothing but the secret, and a session's
// AES-256-GMAC (session_frame_auth.h), ~5 times cheaper, which needs the
// ranks' key round first. Both write the same trailer fields and refuse
// the same frames with the same errors; the Communicator uses the second.
//
// Gloo's TCP transport has no authentication: any host that can reach a
// rank's port can take a pair and send bytes, and the wire checksum only
// catches accidents. A FrameAuthenticator appends a trailer carrying the
// frame's origin and an HMAC-SHA256 tag (OpenSSL) over
//   domain label | frame length | frame | origin fields
// keyed by a secret shared by the job's ranks. A receiver that verifies
// the tag and then checks the origin against what it expects refuses
// frames forged by a host without the secret, frames from another job
// sharing the secret, frames attributed to the wrong rank or bucket, and
// replays of earlier steps. Byte layout: docs/wire_format.md,
// "Authentication trailer".
//
// It authenticates; it does not encrypt (gradients are not secret here,
// their integrity is).
#ifndef GRADWIRE_LIB_CODEC_FRAME_AUTH_H_
#define GRADWIRE_LIB_CODEC_FRAME_AUTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gradwire {

// Environment variable JobSecret::Resolve reads when no flag is given.
inline constexpr char kJobSecretEnv[] = "GRADWIRE_JOB_SECRET";
// ... and, when that is unset, the file this one names (tools/launch.py
// makes a 0600 one per job when no secret is given).
inline constexpr char kJobSecretFileEnv[] = "GRADWIRE_JOB_SECRET_FILE";

// The key shared by every rank of a job. Holds raw bytes; the memory is
// wiped when the object dies. Move-only, and deliberately has no accessor
// or printer: only FrameAuthenticator reads it.
class JobSecret {
 public:
  // Shorter secrets are refused: HMAC-SHA256 is only as strong as its key,
  // and a short one can be brute-forced offline from one captured frame.
  static constexpr size_t kMinBytes = 16;
  // A secret file larger than this is almost certainly the wrong file.
  static constexpr size_t kMaxFileBytes = 4096;
  // A secret file that is a pipe or a device (bash's <(...) is one) must
  // reach its end within this long, or FromFile gives up.
  static constexpr int kFileReadTimeoutMs = 10000;

  // The one loader every source goes through, so the same bytes make the
  // same secret whether they came from a flag, the environment or a file:
  // trailing whitespace (" \t\n\v\f\r": the newline `echo` or an editor
  // leaves) is dropped, and what is left must be at least kMinBytes and
  // not one byte value repeated (16 NUL bytes, "aaaa...": guessable).
  // `origin` names the source ("--job_secret", "$GRADWIRE_JOB_SECRET") in
  // errors, which never show the value. InvalidArgument, saying how to
  // make a good secret (openssl rand -hex 32), if empty, only whitespace,
  // too short or one repeated byte.
  static absl::StatusOr<JobSecret> FromValue(absl::string_view value, absl::string_view origin);

  // Reads environment variable `name`. NotFound if unset; otherwise as
  // FromValue.
  static absl::StatusOr<JobSecret> FromEnvironment(const char* name = kJobSecretEnv);

  // Reads a file's bytes, then as FromValue (so `openssl rand -hex 32 >
  // file` works). NotFound if the file does not exist, PermissionDenied if
  // it cannot be opened for lack of permission, InvalidArgument if it is
  // too large or a directory or its contents are refused by FromValue,
  // DeadlineExceeded if a pipe or device gives no end of file within
  // kFileReadTimeoutMs (a FIFO without a writer reads as empty), Internal
  // for other read errors. Never waits longer than that.
  static absl::StatusOr<JobSecret> FromFile(const std::string& path);

  // The resolution order tools use: `flag_value` if non-empty, else the
  // file `flag_file` if non-empty, else $GRADWIRE_JOB_SECRET, else the file
  // $GRADWIRE_JOB_SECRET_FILE. If none is set: FailedPrecondition naming
  // them all. Prefer the file or the
  // environment: a flag value is visible to every user in `ps`.
  static absl::StatusOr<JobSecret> Resolve(absl::string_view flag_value,
                                           absl::string_view flag_file);

  JobSecret(JobSecret&& other) noexcept;
  JobSecret& operator=(JobSecret&& other) noexcept;
  JobSecret(const JobSecret&) = delete;
  JobSecret& operator=(const JobSecret&) = delete;
  ~JobSecret();

 private:
  friend class FrameAuthenticator;
  explicit JobSecret(std::string bytes) : bytes_(std::move(bytes)) {}
  void Wipe();

  std::string bytes_;
};

// Where a frame claims to come from; covered by the tag.
struct FrameOrigin {
  uint32_t sender_rank = 0;
  uint64_t step = 0;
  // Which bucket of the step: without it, two same-sized buckets a rank
  // sends in one step could be swapped in flight.
  uint32_t bucket = 0;
};

// What the exchanges (lib/comm) sign and verify frames with. Thread-safe.
class FrameSigner {
 public:
  virtual ~FrameSigner() = default;

  // What Sign appends to a frame (the same on every rank of a job).
  virtual size_t trailer_bytes() const = 0;

  // The frame occupies buffer[0, frame_bytes); appends the trailer behind
  // it and returns the authenticated length frame_bytes + trailer_bytes().
  // InvalidArgument if the buffer has no room for the trailer; Internal if
  // the MAC library fails.
  virtual absl::StatusOr<size_t> Sign(absl::Span<uint8_t> buffer, size_t frame_bytes,
                                      const FrameOrigin& origin) const = 0;

  // Verifies an authenticated frame as received and returns the frame
  // without its trailer. Checks, in order:
  //   trailer present and well formed (magic, version, tag size, reserved)
  //       -> Unauthenticated;
  //   tag matches (constant-time compare)
  //       -> Unauthenticated: altered in flight, or a different secret
  //          (or session);
  //   then, on authentic data only: job, sender rank, bucket, step against
  //   `expected` -> PermissionDenied (another job sharing the secret, a
  //   misattributed frame, or a replayed / out-of-order step).
  virtual absl::StatusOr<absl::Span<const uint8_t>> Verify(absl::Span<const uint8_t> authenticated,
                                                           const FrameOrigin& expected) const = 0;
};

// The trailer's fields (docs/wire_format.md, "Authentication trailer"),
// written and checked alike by every FrameSigner.
namespace frame_auth_internal {

inline constexpr size_t kFieldBytes = 40;

// Sign's first check: InvalidArgument unless buffer holds a frame_bytes
// frame and a trailer_bytes trailer behind it.
absl::Status CheckRoom(absl::Span<uint8_t> buffer, size_t frame_bytes, size_t trailer_bytes);

// Writes the fields at `fields` (kFieldBytes).
void WriteFields(uint8_t version, uint8_t tag_bytes, const FrameOrigin& origin,
                 const std::array<uint8_t, 16>& job, uint8_t* fields);

// The structure check of Verify's first step on `authenticated`, whose
// trailer (ending in the fields) is `trailer_bytes` long; the version and
// tag size must be the receiver's. Unauthenticated saying what is wrong.
absl::Status CheckStructure(absl::Span<const uint8_t> authenticated, size_t trailer_bytes,
                            uint8_t version, uint8_t tag_bytes);

// Verify's last step on fields whose tag has been checked: PermissionDenied
// for another job (`job` / `job_id` are the receiver's), rank, bucket or
// step than `expected`.
absl::Status CheckOrigin(const uint8_t* fields, const std::array<uint8_t, 16>& job,
                         absl::string_view job_id, const FrameOrigin& expected);

}  // namespace frame_auth_internal

// Signs and verifies frames for one job under HMAC-SHA256 keyed by the job
// secret (trailer version 1). Thread-safe: Sign and Verify are const and
// use a private MAC context per call.
class FrameAuthenticator : public FrameSigner {
 public:
  // Bytes of the trailer other than the tag (see docs/wire_format.md).
  static constexpr size_t kTrailerFieldBytes = frame_auth_internal::kFieldBytes;

  // `job_id` names the job (e.g. the rendezvous namespace); non-empty.
  // `tag_bytes` is 16 (HMAC-SHA256 truncated, as RFC 2104 allows down to
  // half the hash) or 32 (untruncated). Every rank of a job must use the
  // same; a frame with another tag size is refused.
  static absl::StatusOr<FrameAuthenticator> Create(const JobSecret& secret,
                                                   absl::string_view job_id, size_t tag_bytes = 16);

  FrameAuthenticator(FrameAuthenticator&&) noexcept;
  FrameAuthenticator& operator=(FrameAuthenticator&&) noexcept;
  ~FrameAuthenticator() override;

  size_t tag_bytes() const { return tag_bytes_; }
  // What Sign appends to a frame: tag + origin fields.
  size_t trailer_bytes() const override { return tag_bytes_ + kTrailerFieldBytes; }

  // FrameSigner's, under HMAC-SHA256.
  absl::StatusOr<size_t> Sign(absl::Span<uint8_t> buffer, size_t frame_bytes,
                              const FrameOrigin& origin) const override;
  absl::StatusOr<absl::Span<const uint8_t>> Verify(absl::Span<const uint8_t> authenticated,
                                                   const FrameOrigin& expected) const override;

  // The job's name, and its fingerprint as the trailer carries it (public:
  // every frame shows it).
  const std::string& job_id() const { return job_id_; }
  const std::array<uint8_t, 16>& job_fingerprint() const { return job_fingerprint_; }

 private:
  friend class ChunkMac;  // derives its session keys from the secret
  struct MacState;        // OpenSSL objects, kept out of this header

  FrameAuthenticator(std::unique_ptr<MacState> mac, std::string job_id,
                     std::array<uint8_t, 16> job_fingerprint, size_t tag_bytes);

  // Full 32-byte HMAC over the frame and the trailer fields.
  absl::Status ComputeMac(absl::Span<const uint8_t> frame, const uint8_t* fields,
                          uint8_t out[32]) const;
  // HMAC-SHA256 under the job secret of `label` (with its NUL) followed by
  // `parts`. Every use has its own label (the frame MAC's, ChunkMac's
  // keys), so no value derived for one purpose serves another.
  absl::Status KeyedHash(const char* label, std::initializer_list<absl::Span<const uint8_t>> parts,
                         uint8_t out[32]) const;

  std::unique_ptr<MacState> mac_;
  std::string job_id_;
  std::array<uint8_t, 16> job_fingerprint_;
  size_t tag_bytes_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_FRAME_AUTH_H_
