// Tests of lib/codec/session_frame_auth.h: frames signed with a session's
// GMAC (trailer version 2). The fields and their checks are version 1's
// (tests/frame_auth_test.cc); these tests cover what the session adds: the
// tag under the session key, the IV, the domain apart from dense chunks.
#include "gradwire/lib/codec/session_frame_auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gradwire/base/coding.h"
#include "gtest/gtest.h"
#include "tests/expect_rejected.h"
#include "tests/session_key_fixture.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

using testing_keys::kSecret;
using testing_keys::Nonces;

constexpr size_t kIvAndTag = ChunkMac::kTrailerBytes;
constexpr size_t kFields = FrameAuthenticator::kTrailerFieldBytes;

FrameAuthenticator Auth(const char* job = "job-a") { return testing_keys::Auth(kSecret, job); }

std::shared_ptr<const ChunkMac> Key(const FrameAuthenticator& auth, uint32_t rank, uint32_t size,
                                    const std::vector<uint8_t>& nonces) {
  auto m = ChunkMac::Create(auth, rank, size, nonces);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::make_shared<const ChunkMac>(std::move(*m));
}

std::vector<uint8_t> SomeFrame(size_t n) {
  std::vector<uint8_t> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<uint8_t>(7 + i * 37);
  return f;
}

std::vector<uint8_t> Signed(const FrameSigner& auth, const std::vector<uint8_t>& frame,
                            const FrameOrigin& origin) {
  std::vector<uint8_t> buf(frame.size() + auth.trailer_bytes());
  std::copy(frame.begin(), frame.end(), buf.begin());
  auto n = auth.Sign(absl::MakeSpan(buf), frame.size(), origin);
  EXPECT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, buf.size());
  return buf;
}

absl::Status Check(const FrameSigner& auth, const std::vector<uint8_t>& authenticated,
                   const FrameOrigin& expected) {
  return auth.Verify(authenticated, expected).status();
}

// Three ranks of one session, each with its own signer.
struct Session {
  explicit Session(const FrameAuthenticator& auth, uint8_t seed = 1) {
    const std::vector<uint8_t> nonces = Nonces(3, seed);
    for (uint32_t r = 0; r < 3; ++r) {
      keys.push_back(Key(auth, r, 3, nonces));
      ranks.push_back(std::make_unique<SessionFrameAuth>(auth, keys.back()));
    }
  }
  std::vector<std::shared_ptr<const ChunkMac>> keys;
  std::vector<std::unique_ptr<SessionFrameAuth>> ranks;
};

TEST(SessionFrameAuthTest, SignedFrameVerifiesOnEveryRankAndYieldsTheFrame) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  const std::vector<uint8_t> frame = SomeFrame(1000);
  const std::vector<uint8_t> a = Signed(*s.ranks[2], frame, {2, 9, 4});
  EXPECT_EQ(a.size(), frame.size() + 68);
  for (const auto& r : s.ranks) {
    auto v = r->Verify(a, {2, 9, 4});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(std::vector<uint8_t>(v->begin(), v->end()), frame);
  }
  // An empty frame too.
  EXPECT_TRUE(Check(*s.ranks[0], Signed(*s.ranks[1], {}, {1, 0, 0}), {1, 0, 0}).ok());
}

TEST(SessionFrameAuthTest, TrailerIsDocumentedGmacOverTheFields) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  const std::vector<uint8_t> frame = SomeFrame(333);
  const std::vector<uint8_t> a = Signed(*s.ranks[1], frame, {1, 0x0102030405060708ull, 77});
  const uint8_t* iv = a.data() + frame.size();
  const uint8_t* fields = iv + kIvAndTag;
  EXPECT_EQ(DecodeFixed32(iv), 1u);      // the sealing rank
  EXPECT_EQ(DecodeFixed64(iv + 4), 0u);  // its first seal
  EXPECT_EQ(DecodeFixed32(fields), 0x31415747u);
  EXPECT_EQ(fields[4], 2);   // version: session GMAC
  EXPECT_EQ(fields[5], 16);  // tag bytes
  EXPECT_EQ(DecodeFixed32(fields + 8), 1u);
  EXPECT_EQ(DecodeFixed32(fields + 12), 77u);
  EXPECT_EQ(DecodeFixed64(fields + 16), 0x0102030405060708ull);
  EXPECT_EQ(std::vector<uint8_t>(fields + 24, fields + 40),
            std::vector<uint8_t>(auth.job_fingerprint().begin(), auth.job_fingerprint().end()));
  // The tag, computed here from the document: the session key, then
  // AES-256-GCM over the labelled lengths, fields and frame.
  const auto key = testing_keys::DocumentedSessionKey(auth.job_fingerprint().data(), 3, Nonces(3));
  const auto tag = testing_keys::DocumentedGmac(key, iv, "gradwire frame GMAC v2",
                                                {fields, fields + kFields}, frame);
  EXPECT_EQ(std::vector<uint8_t>(iv + 12, iv + 28), std::vector<uint8_t>(tag.begin(), tag.end()));

  // A dense chunk's Verify of the same bytes fails (another label), the
  // frame's succeeds.
  const absl::Span<const uint8_t> f(a.data(), frame.size()), ctx_fields(fields, kFields);
  EXPECT_TRUE(s.keys[0]->VerifyFrame(ctx_fields, f, iv).ok());
  EXPECT_REJECTED(s.keys[0]->Verify(ctx_fields, f, iv), absl::StatusCode::kUnauthenticated,
                  "MAC mismatch");
  // ... and a dense chunk's tag never passes as a frame's.
  std::vector<uint8_t> chunk_trailer(kIvAndTag);
  ASSERT_TRUE(s.keys[1]->Seal(ctx_fields, f, chunk_trailer.data()).ok());
  EXPECT_REJECTED(s.keys[0]->VerifyFrame(ctx_fields, f, chunk_trailer.data()),
                  absl::StatusCode::kUnauthenticated, "MAC mismatch");
}

TEST(SessionFrameAuthTest, FramesAndChunksNeverShareAnIv) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  std::set<std::vector<uint8_t>> ivs;
  const std::vector<uint8_t> frame = SomeFrame(40);
  for (int i = 0; i < 50; ++i) {
    for (uint32_t r = 0; r < 3; ++r) {
      const std::vector<uint8_t> a = Signed(*s.ranks[r], frame, {r, 1, 0});
      EXPECT_TRUE(ivs.insert({a.begin() + 40, a.begin() + 52}).second) << r << " " << i;
      std::vector<uint8_t> t(kIvAndTag);
      ASSERT_TRUE(s.keys[r]->Seal(frame, frame, t.data()).ok());
      EXPECT_TRUE(ivs.insert({t.begin(), t.begin() + 12}).second) << r << " " << i;
    }
  }
}

TEST(SessionFrameAuthTest, EverySingleBitFlipIsUnauthenticated) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  const std::vector<uint8_t> a = Signed(*s.ranks[1], SomeFrame(64), {1, 3, 2});
  for (size_t bit = 0; bit < a.size() * 8; ++bit) {
    std::vector<uint8_t> b = a;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const absl::Status st = Check(*s.ranks[0], b, {1, 3, 2});
    ASSERT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << "bit " << bit << ": " << st;
    // Frame, IV, tag and origin fields are all under the tag.
    if (bit / 8 < 64 + kIvAndTag || bit / 8 >= 64 + kIvAndTag + 8) {
      EXPECT_THAT(std::string(st.message()), HasSubstr("MAC mismatch")) << bit;
    }
  }
  for (size_t len = 0; len < a.size(); ++len) {
    EXPECT_EQ(Check(*s.ranks[0], {a.begin(), a.begin() + len}, {1, 3, 2}).code(),
              absl::StatusCode::kUnauthenticated)
        << len;
  }
}

TEST(SessionFrameAuthTest, AnotherSessionOrSecretIsUnauthenticated) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth), later(auth, /*seed=*/2);
  const std::vector<uint8_t> a = Signed(*s.ranks[1], SomeFrame(64), {1, 3, 2});
  // A frame recorded in one session is refused in the next, even at the
  // same step, rank and bucket.
  EXPECT_REJECTED(Check(*later.ranks[0], a, {1, 3, 2}), absl::StatusCode::kUnauthenticated,
                  "another session");
  auto other = JobSecret::FromValue("fedcba9876543210fedcba9876543210", "test");
  ASSERT_TRUE(other.ok());
  auto forger = FrameAuthenticator::Create(*other, "job-a");
  ASSERT_TRUE(forger.ok());
  const Session f(*forger);
  EXPECT_REJECTED(Check(*s.ranks[0], Signed(*f.ranks[1], SomeFrame(64), {1, 3, 2}), {1, 3, 2}),
                  absl::StatusCode::kUnauthenticated, "MAC mismatch");
}

TEST(SessionFrameAuthTest, WrongOriginIsPermissionDenied) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  const std::vector<uint8_t> a = Signed(*s.ranks[1], SomeFrame(64), {1, 5, 2});
  EXPECT_REJECTED(Check(*s.ranks[0], a, {2, 5, 2}), absl::StatusCode::kPermissionDenied,
                  "signed by rank 1, expected rank 2");
  EXPECT_REJECTED(Check(*s.ranks[0], a, {1, 5, 3}), absl::StatusCode::kPermissionDenied,
                  "for bucket 2, expected bucket 3");
  EXPECT_REJECTED(Check(*s.ranks[0], a, {1, 6, 2}), absl::StatusCode::kPermissionDenied,
                  "replayed or stale frame from step 5");
  EXPECT_REJECTED(Check(*s.ranks[0], a, {1, 4, 2}), absl::StatusCode::kPermissionDenied,
                  "ahead of expected step 4");
}

TEST(SessionFrameAuthTest, VersionsAreNotInterchangeable) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  const std::vector<uint8_t> frame = SomeFrame(64);
  // A job-HMAC frame offered to a session receiver, and the reverse.
  EXPECT_REJECTED(Check(*s.ranks[0], Signed(auth, frame, {1, 3, 2}), {1, 3, 2}),
                  absl::StatusCode::kUnauthenticated, "receiver verifies version 2");
  EXPECT_REJECTED(Check(auth, Signed(*s.ranks[1], frame, {1, 3, 2}), {1, 3, 2}),
                  absl::StatusCode::kUnauthenticated, "receiver verifies version 1");
}

TEST(SessionFrameAuthTest, SignRefusesABufferWithoutRoomForTheTrailer) {
  const FrameAuthenticator auth = Auth();
  const Session s(auth);
  std::vector<uint8_t> buf(100 + SessionFrameAuth::kTrailerBytes - 1);
  EXPECT_REJECTED(s.ranks[0]->Sign(absl::MakeSpan(buf), 100, {0, 0, 0}).status(),
                  absl::StatusCode::kInvalidArgument, "no room");
  EXPECT_REJECTED(s.ranks[0]->Sign(absl::MakeSpan(buf), buf.size() + 1, {0, 0, 0}).status(),
                  absl::StatusCode::kInvalidArgument, "no room");
}

}  // namespace
}  // namespace gradwire
