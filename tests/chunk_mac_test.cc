// Tests of lib/codec/chunk_mac.h: the dense exchange's session keys, key
// confirmation and chunk GMAC.
#include "gradwire/lib/codec/chunk_mac.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/session_key_fixture.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

using testing_keys::Auth;
using testing_keys::kSecret;
using testing_keys::Nonces;

constexpr char kOtherSecret[] = "fedcba9876543210fedcba9876543210";

ChunkMac Session(const FrameAuthenticator& auth, uint32_t rank, uint32_t size,
                 const std::vector<uint8_t>& nonces) {
  auto m = ChunkMac::Create(auth, rank, size, nonces);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 131);
  return b;
}

std::vector<uint8_t> Sealed(const ChunkMac& mac, const std::vector<uint8_t>& context,
                            const std::vector<uint8_t>& chunk) {
  std::vector<uint8_t> trailer(ChunkMac::kTrailerBytes);
  EXPECT_TRUE(mac.Seal(context, chunk, trailer.data()).ok());
  return trailer;
}

std::vector<uint8_t> Confirmations(const std::vector<const ChunkMac*>& ranks) {
  std::vector<uint8_t> all;
  for (const ChunkMac* m : ranks) {
    all.insert(all.end(), m->Confirmation().begin(), m->Confirmation().end());
  }
  return all;
}

const std::vector<int> kNames3 = {0, 1, 2};

TEST(ChunkMacTest, SealedChunkVerifiesOnEveryRankOfTheSession) {
  const FrameAuthenticator auth = Auth();
  const std::vector<uint8_t> nonces = Nonces(3);
  const ChunkMac r0 = Session(auth, 0, 3, nonces), r1 = Session(auth, 1, 3, nonces),
                 r2 = Session(auth, 2, 3, nonces);
  const std::vector<uint8_t> all = Confirmations({&r0, &r1, &r2});
  for (const ChunkMac* m : {&r0, &r1, &r2}) EXPECT_TRUE(m->CheckConfirmations(all, kNames3).ok());
  const std::vector<uint8_t> context = Bytes(56, 3), chunk = Bytes(1000, 9);
  const std::vector<uint8_t> trailer = Sealed(r1, context, chunk);
  for (const ChunkMac* m : {&r0, &r1, &r2}) {
    EXPECT_TRUE(m->Verify(context, chunk, trailer.data()).ok());
  }
  // Empty chunks and contexts too.
  const std::vector<uint8_t> empty_trailer = Sealed(r0, {}, {});
  EXPECT_TRUE(r2.Verify({}, {}, empty_trailer.data()).ok());
}

// The IV is (sealing rank, its seal counter): never repeated in a session,
// whatever is sealed, from however many threads.
TEST(ChunkMacTest, IvsNeverRepeat) {
  const FrameAuthenticator auth = Auth();
  const std::vector<uint8_t> nonces = Nonces(2);
  const ChunkMac r0 = Session(auth, 0, 2, nonces), r1 = Session(auth, 1, 2, nonces);
  std::vector<std::vector<std::vector<uint8_t>>> ivs(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const ChunkMac& m = t % 2 ? r1 : r0;
      for (int i = 0; i < 200; ++i) {
        const std::vector<uint8_t> trailer = Sealed(m, {}, Bytes(64, 1));
        if (!m.Verify({}, Bytes(64, 1), trailer.data()).ok()) ADD_FAILURE();
        ivs[t].emplace_back(trailer.begin(), trailer.begin() + 12);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::vector<uint8_t>> distinct;
  for (const auto& per_thread : ivs) distinct.insert(per_thread.begin(), per_thread.end());
  EXPECT_EQ(distinct.size(), 800u);
  // Rank 1's IVs start with its rank.
  EXPECT_EQ(ivs[1][0][0], 1);
  EXPECT_EQ(ivs[0][0][0], 0);
}

// The construction docs/wire_format.md describes, recomputed with OpenSSL
// directly: key = HMAC-SHA256(secret, "gradwire dense chunk key v1\0" |
// job fingerprint | u32 ranks | nonces); tag = AES-256-GCM under that key
// with IV = trailer[0, 12) over no plaintext and the additional data
// "gradwire dense chunk v1\0" | u64 context length | u64 chunk length |
// context | chunk.
TEST(ChunkMacTest, TagIsDocumentedGmac) {
  const FrameAuthenticator auth = Auth();
  const std::vector<uint8_t> nonces = Nonces(2);
  const ChunkMac mac = Session(auth, 1, 2, nonces);
  const std::vector<uint8_t> context = Bytes(20, 5), chunk = Bytes(333, 8);
  const std::vector<uint8_t> trailer = Sealed(mac, context, chunk);
  EXPECT_EQ(std::vector<uint8_t>(trailer.begin(), trailer.begin() + 12),
            std::vector<uint8_t>({1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));  // rank 1, seal 0

  // The job fingerprint travels in the confirmation.
  const auto key = testing_keys::DocumentedSessionKey(mac.Confirmation().data(), 2, nonces);
  const auto tag =
      testing_keys::DocumentedGmac(key, trailer.data(), "gradwire dense chunk v1", context, chunk);
  EXPECT_EQ(std::vector<uint8_t>(trailer.begin() + 12, trailer.end()),
            std::vector<uint8_t>(tag.begin(), tag.end()));
}

TEST(ChunkMacTest, EverySingleBitFlipIsUnauthenticated) {
  const FrameAuthenticator auth = Auth();
  const std::vector<uint8_t> nonces = Nonces(2);
  const ChunkMac r0 = Session(auth, 0, 2, nonces), r1 = Session(auth, 1, 2, nonces);
  const std::vector<uint8_t> context = Bytes(16, 2), chunk = Bytes(48, 4);
  const std::vector<uint8_t> trailer = Sealed(r0, context, chunk);
  int accepted = 0, flips = 0;
  const size_t sizes[3] = {context.size(), chunk.size(), trailer.size()};
  for (int part = 0; part < 3; ++part) {
    for (size_t bit = 0; bit < sizes[part] * 8; ++bit) {
      std::vector<uint8_t> p[3] = {context, chunk, trailer};
      p[part][bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const absl::Status s = r1.Verify(p[0], p[1], p[2].data());
      ++flips;
      if (s.ok()) ++accepted;
      if (!s.ok() && !absl::IsUnauthenticated(s)) ADD_FAILURE() << s;
    }
  }
  EXPECT_EQ(flips, (16 + 48 + 28) * 8);
  EXPECT_EQ(accepted, 0);
  // Moving a byte from the context to the chunk changes the lengths.
  std::vector<uint8_t> shorter(context.begin(), context.end() - 1), longer = chunk;
  longer.insert(longer.begin(), context.back());
  EXPECT_TRUE(absl::IsUnauthenticated(r1.Verify(shorter, longer, trailer.data())));
}

TEST(ChunkMacTest, AnotherSecretFailsConfirmationAndEveryChunk) {
  const FrameAuthenticator good = Auth(), bad = Auth(kOtherSecret);
  const std::vector<uint8_t> nonces = Nonces(3);
  const ChunkMac r0 = Session(good, 0, 3, nonces), r1 = Session(bad, 1, 3, nonces),
                 r2 = Session(good, 2, 3, nonces);
  const std::vector<uint8_t> all = Confirmations({&r0, &r1, &r2});
  // The good ranks name the bad one; the bad one names both good ones.
  for (const ChunkMac* m : {&r0, &r2}) {
    const absl::Status s = m->CheckConfirmations(all, kNames3);
    EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank(s) [1]"));
  }
  const absl::Status s1 = r1.CheckConfirmations(all, kNames3);
  EXPECT_TRUE(absl::IsUnauthenticated(s1)) << s1;
  EXPECT_THAT(std::string(s1.message()), HasSubstr("rank(s) [0, 2]"));
  // Names are the caller's (world ranks of a split group).
  EXPECT_THAT(std::string(r0.CheckConfirmations(all, {4, 7, 9}).message()),
              HasSubstr("rank(s) [7] does not verify under rank 4's"));

  const std::vector<uint8_t> trailer = Sealed(r1, {}, Bytes(100, 1));
  EXPECT_TRUE(absl::IsUnauthenticated(r0.Verify({}, Bytes(100, 1), trailer.data())));
  const std::vector<uint8_t> back = Sealed(r0, {}, Bytes(100, 1));
  EXPECT_TRUE(absl::IsUnauthenticated(r1.Verify({}, Bytes(100, 1), back.data())));
}

TEST(ChunkMacTest, AnotherJobSharingTheSecretIsPermissionDenied) {
  const FrameAuthenticator a = Auth(kSecret, "job-a"), b = Auth(kSecret, "job-b");
  const std::vector<uint8_t> nonces = Nonces(2);
  const ChunkMac r0 = Session(a, 0, 2, nonces), r1 = Session(b, 1, 2, nonces);
  const std::vector<uint8_t> all = Confirmations({&r0, &r1});
  const absl::Status s = r0.CheckConfirmations(all, {0, 1});
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("two jobs share a secret"));
  EXPECT_TRUE(absl::IsPermissionDenied(r1.CheckConfirmations(all, {0, 1})));
  // Their chunk keys differ too.
  const std::vector<uint8_t> trailer = Sealed(r1, {}, Bytes(10, 1));
  EXPECT_TRUE(absl::IsUnauthenticated(r0.Verify({}, Bytes(10, 1), trailer.data())));
}

// A tampered nonce gives its victim another key: refused at confirmation.
// A chunk of an earlier session (other nonces) is refused in a new one.
TEST(ChunkMacTest, SessionsAreDistinct) {
  const FrameAuthenticator auth = Auth();
  const std::vector<uint8_t> nonces = Nonces(2);
  std::vector<uint8_t> tampered = nonces;
  tampered[3] ^= 1;
  const ChunkMac r0 = Session(auth, 0, 2, nonces), r1 = Session(auth, 1, 2, tampered);
  const std::vector<uint8_t> all = Confirmations({&r0, &r1});
  EXPECT_TRUE(absl::IsUnauthenticated(r0.CheckConfirmations(all, {0, 1})));
  EXPECT_TRUE(absl::IsUnauthenticated(r1.CheckConfirmations(all, {0, 1})));

  const ChunkMac old_session = Session(auth, 0, 2, nonces);
  const ChunkMac new_session = Session(auth, 1, 2, Nonces(2, 77));
  const std::vector<uint8_t> trailer = Sealed(old_session, Bytes(8, 1), Bytes(64, 2));
  EXPECT_TRUE(
      absl::IsUnauthenticated(new_session.Verify(Bytes(8, 1), Bytes(64, 2), trailer.data())));
  // The world size is bound as well.
  const std::vector<uint8_t> nonces3 = Nonces(3);
  const ChunkMac three = Session(auth, 1, 3, nonces3);
  const ChunkMac two_of_same =
      Session(auth, 1, 2, std::vector<uint8_t>(nonces3.begin(), nonces3.begin() + 32));
  EXPECT_TRUE(absl::IsUnauthenticated(
      two_of_same.Verify({}, Bytes(4, 1), Sealed(three, {}, Bytes(4, 1)).data())));
}

TEST(ChunkMacTest, CreateRefusesBadArguments) {
  const FrameAuthenticator auth = Auth();
  EXPECT_TRUE(absl::IsInvalidArgument(ChunkMac::Create(auth, 2, 2, Nonces(2)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ChunkMac::Create(auth, 0, 0, {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ChunkMac::Create(auth, 0, 3, Nonces(2)).status()));
  const ChunkMac m = Session(auth, 0, 2, Nonces(2));
  EXPECT_TRUE(absl::IsInvalidArgument(m.CheckConfirmations(std::vector<uint8_t>(32), {0, 1})));
  EXPECT_TRUE(absl::IsInvalidArgument(m.CheckConfirmations(std::vector<uint8_t>(64), {0})));
}

TEST(ChunkMacTest, NewNoncesDiffer) {
  auto a = ChunkMac::NewNonce(), b = ChunkMac::NewNonce();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace gradwire
