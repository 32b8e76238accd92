// Tests for base/envelope: the layout is pinned byte for byte, and an
// envelope cut at any offset, with any one bit flipped, or of a version
// outside the reader's range is refused with the documented code, in the
// documented order (magic, then checksum, then version).
#include "gradwire/base/envelope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

std::string Sealed(absl::string_view magic, uint32_t version, absl::string_view body) {
  std::string out = StartEnvelope(magic, version);
  PutBytes(&out, body);
  SealEnvelope(&out);
  return out;
}

TEST(EnvelopeTest, LayoutIsMagicVersionBodyChecksum) {
  const std::string e = Sealed("GWEF", 0x01020304, "body");
  std::string want = std::string("GWEF") + std::string("\x04\x03\x02\x01", 4) + "body";
  const uint64_t sum = XXH3_64bits(want.data(), want.size());
  for (int i = 0; i < 8; ++i) want.push_back(static_cast<char>(sum >> (8 * i)));
  EXPECT_EQ(e, want);
  EXPECT_EQ(Checksum64(want.data(), 12), XXH3_64bits(want.data(), 12));
  EXPECT_EQ(Checksum64(absl::string_view(want).substr(0, 12)), Checksum64(want.data(), 12));
}

// XXH3 takes different paths below 17, 129 and 241 bytes, a 64-byte
// stripe and a 1024-byte block, and buffers 256 bytes between updates: the
// stream's digest is the one-shot checksum for every length around those,
// however the bytes are split (empty updates too).
TEST(EnvelopeTest, StreamedChecksumIsTheOneShotChecksumForAnySplit) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<unsigned char> bytes(20000);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  std::vector<size_t> lengths = {0,   1,   3,   16,   17,   128,  129,  240,  241,
                                 255, 256, 257, 1023, 1024, 1025, 4096, 4097, 20000};
  for (int i = 0; i < 20; ++i) lengths.push_back(rng() % bytes.size());
  for (size_t n : lengths) {
    for (size_t piece :
         {size_t{1}, size_t{7}, size_t{64}, size_t{72}, size_t{255}, size_t{4096}, size_t{0}}) {
      StreamingChecksum64 stream;
      size_t at = 0;
      while (at < n) {
        // piece 0: random pieces, empty ones included.
        const size_t len = std::min(n - at, piece > 0 ? piece : rng() % 600);
        stream.Update(bytes.data() + at, len);
        at += len;
      }
      EXPECT_EQ(stream.bytes(), n);
      EXPECT_EQ(stream.Digest(), Checksum64(bytes.data(), n)) << n << " bytes, pieces " << piece;
    }
  }
  // Digest does not end the stream.
  StreamingChecksum64 stream;
  stream.Update(bytes.data(), 300);
  EXPECT_EQ(stream.Digest(), Checksum64(bytes.data(), 300));
  stream.Update(bytes.data() + 300, 5000);
  EXPECT_EQ(stream.Digest(), Checksum64(bytes.data(), 5300));
}

TEST(EnvelopeTest, OpenReturnsTheVersionAndAViewOfTheBody) {
  for (absl::string_view magic : {"GWCM", "GWSHARD1"}) {
    for (absl::string_view body : {"", "x", "a longer body"}) {
      const std::string e = Sealed(magic, 3, body);
      absl::StatusOr<Envelope> opened = OpenEnvelope(e, magic, 2, 4, "thing");
      ASSERT_TRUE(opened.ok()) << opened.status();
      EXPECT_EQ(opened->version, 3u);
      EXPECT_EQ(opened->body, body);
      EXPECT_EQ(opened->body.data(), e.data() + magic.size() + 4);  // a view
    }
  }
}

TEST(EnvelopeTest, TruncationAtEveryOffsetIsRefused) {
  const std::string e = Sealed("GWEF", 1, "some body bytes");
  for (size_t cut = 0; cut < e.size(); ++cut) {
    const absl::Status s = OpenEnvelope(e.substr(0, cut), "GWEF", 1, 1, "state").status();
    if (cut < 4 + 4 + 8) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
      EXPECT_THAT(std::string(s.message()), HasSubstr("state: bad magic or too short")) << cut;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << cut;
    }
  }
  // Bytes appended after the checksum move it: corrupt too.
  EXPECT_EQ(OpenEnvelope(e + "x", "GWEF", 1, 1, "state").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(EnvelopeTest, EveryBitFlipIsRefused) {
  const std::string e = Sealed("GWEF", 1, "body");
  for (size_t bit = 0; bit < 8 * e.size(); ++bit) {
    std::string bad = e;
    bad[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    const absl::Status s = OpenEnvelope(bad, "GWEF", 1, 1, "state").status();
    if (bit < 8 * 4) {
      EXPECT_THAT(std::string(s.message()), HasSubstr("bad magic")) << bit;
    } else {
      // Version bits too: the checksum is checked before the version.
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << bit;
      EXPECT_THAT(std::string(s.message()), HasSubstr("state checksum mismatch")) << bit;
    }
  }
}

TEST(EnvelopeTest, VersionsOutsideTheRangeAreRefusedByName) {
  for (uint32_t v : {0u, 1u, 2u, 3u, 4u, 0xffffffffu}) {
    const std::string e = Sealed("GWEF", v, "body");
    const absl::Status one = OpenEnvelope(e, "GWEF", 2, 2, "state").status();
    const absl::Status range = OpenEnvelope(e, "GWEF", 2, 3, "state").status();
    EXPECT_EQ(one.ok(), v == 2) << v;
    EXPECT_EQ(range.ok(), v == 2 || v == 3) << v;
    if (v != 2) {
      EXPECT_EQ(one.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(
          std::string(one.message()),
          HasSubstr(absl::StrCat("state version ", v, " is not supported (this build reads 2)")));
    }
    if (!range.ok()) {
      EXPECT_THAT(std::string(range.message()), HasSubstr("(this build reads 2 to 3)"));
    }
  }
}

TEST(EnvelopeTest, AnotherFormatsMagicIsRefused) {
  const std::string e = Sealed("GWCM", 1, "body");
  const absl::Status s = OpenEnvelope(e, "GWEF", 1, 1, "error-feedback state").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("error-feedback state: bad magic or too short (20 bytes; expected "
                        "\"GWEF\" and at least 16)"));
}

}  // namespace
}  // namespace gradwire
