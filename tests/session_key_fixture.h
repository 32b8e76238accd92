// Test fixtures for the job secret's MACs (tests/chunk_mac_test.cc,
// tests/session_frame_auth_test.cc): a job's FrameAuthenticator from a
// fixed secret, a fixed key round's nonces, and the session key and GMAC
// tag computed as docs/wire_format.md writes them, with OpenSSL directly.
#ifndef GRADWIRE_TESTS_SESSION_KEY_FIXTURE_H_
#define GRADWIRE_TESTS_SESSION_KEY_FIXTURE_H_

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gradwire/lib/codec/chunk_mac.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace testing_keys {

inline constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

// Job `job`'s authenticator under `secret` (at least 16 bytes).
inline FrameAuthenticator Auth(const char* secret = kSecret, const char* job = "job-a") {
  auto s = JobSecret::FromValue(secret, "test");
  EXPECT_TRUE(s.ok()) << s.status();
  auto a = FrameAuthenticator::Create(*s, job);
  EXPECT_TRUE(a.ok()) << a.status();
  return std::move(*a);
}

// Every rank's nonce of a key round of `size` ranks, fixed by `seed`.
inline std::vector<uint8_t> Nonces(uint32_t size, uint8_t seed = 1) {
  std::vector<uint8_t> n(size * ChunkMac::kNonceBytes);
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(seed + i * 29);
  return n;
}

// session_key = HMAC-SHA256(kSecret, "gradwire dense chunk key v1" 0x00 ‖
// job fingerprint ‖ u32 ranks ‖ nonces).
inline std::array<uint8_t, 32> DocumentedSessionKey(const uint8_t* job, uint32_t ranks,
                                                    const std::vector<uint8_t>& nonces) {
  std::string input("gradwire dense chunk key v1", 28);
  input.append(job, job + 16);
  for (int i = 0; i < 4; ++i) input.push_back(static_cast<char>(ranks >> (8 * i)));
  input.append(nonces.begin(), nonces.end());
  std::array<uint8_t, 32> key{};
  unsigned int key_len = 0;
  EXPECT_NE(HMAC(EVP_sha256(), kSecret, 32, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size(), key.data(), &key_len),
            nullptr);
  return key;
}

// The AES-256-GCM tag under `key` and the 12-byte `iv` with no plaintext
// and additional data label (with its NUL) ‖ u64 context length ‖ u64
// message length ‖ context ‖ message.
inline std::array<uint8_t, 16> DocumentedGmac(const std::array<uint8_t, 32>& key, const uint8_t* iv,
                                              const char* label,
                                              const std::vector<uint8_t>& context,
                                              const std::vector<uint8_t>& message) {
  std::string aad(label, std::char_traits<char>::length(label) + 1);
  for (uint64_t len : {uint64_t{context.size()}, uint64_t{message.size()}}) {
    for (int i = 0; i < 8; ++i) aad.push_back(static_cast<char>(len >> (8 * i)));
  }
  aad.append(context.begin(), context.end());
  aad.append(message.begin(), message.end());
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  unsigned char none[16];
  std::array<uint8_t, 16> tag{};
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv), 1);
  EXPECT_EQ(
      EVP_EncryptUpdate(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())),
      1);
  EXPECT_EQ(EVP_EncryptFinal_ex(ctx, none, &len), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag.data()), 1);
  EVP_CIPHER_CTX_free(ctx);
  return tag;
}

}  // namespace testing_keys
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_SESSION_KEY_FIXTURE_H_
