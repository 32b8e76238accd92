// Tests for base/coding: little-endian byte order is pinned, every varint
// has exactly one accepted encoding (checked exhaustively up to two bytes
// and at every length boundary), and a ByteReader never reads past its
// input: cut anywhere, a record fails at the field the cut falls in, names
// it, and leaves the reader where that field starts.
#include "gradwire/base/coding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/test_seed.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string VarintOf(uint32_t v) {
  std::string out;
  PutVarint32(&out, v);
  return out;
}

// Decodes with all three entry points and checks they agree; returns the
// status of DecodeVarint32 (the one that explains a refusal).
absl::Status DecodeAll(const std::vector<uint8_t>& in, uint32_t* v, size_t* consumed) {
  size_t pos = 0;
  uint32_t a = 0xdeadbeef;
  const absl::Status s = DecodeVarint32(in, &pos, &a, "test varint");
  uint32_t b = 0;
  const uint8_t* next = GetVarint32Ptr(in.data(), in.data() + in.size(), &b);
  ByteReader r(absl::MakeConstSpan(in), "reader");
  uint32_t c = 0;
  const absl::Status rs = r.ReadVarint32("field", &c);
  EXPECT_EQ(s.ok(), next != nullptr);
  EXPECT_EQ(s.ok(), rs.ok());
  if (s.ok()) {
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    EXPECT_EQ(pos, static_cast<size_t>(next - in.data()));
    EXPECT_EQ(pos, r.position());
  } else {
    EXPECT_EQ(pos, 0u) << "a refused varint must consume nothing";
    EXPECT_EQ(a, 0xdeadbeefu) << "a refused varint must not write its value";
    EXPECT_EQ(r.position(), 0u);
  }
  *v = a;
  *consumed = pos;
  return s;
}

// ---------------------------------------------------------- fixed width

TEST(CodingTest, FixedWidthIsLittleEndian) {
  uint8_t b[8];
  EncodeFixed16(b, 0x0201);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(b[1], 0x02);
  EncodeFixed32(b, 0x04030201u);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 4), (std::vector<uint8_t>{1, 2, 3, 4}));
  EncodeFixed64(b, 0x0807060504030201u);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 8), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(DecodeFixed64(b), 0x0807060504030201u);
  EXPECT_EQ(DecodeFixed32(b + 4), 0x08070605u);
  EXPECT_EQ(DecodeFixed16(b + 6), 0x0807u);

  std::string s;
  PutFixed16(&s, 0xbeef);
  PutFixed32(&s, 0xdeadbeefu);
  PutFixed64(&s, 0xffu);
  EXPECT_EQ(s, std::string("\xef\xbe\xef\xbe\xad\xde\xff\0\0\0\0\0\0\0", 14));
  EXPECT_EQ(DecodeFixed32(s.data() + 2), 0xdeadbeefu);
  EXPECT_EQ(DecodeFixed64(s.data() + 6), 0xffu);
}

enum class Color : uint8_t { kRed = 1, kBlue = 200 };
enum class Wide : uint32_t { kBig = 0xa1b2c3d4 };

TEST(CodingTest, GenericFixedMatchesTheSizedFormsAndCarriesEnums) {
  uint8_t a[8], b[8];
  EncodeFixed<uint64_t>(a, 0x1122334455667788u);
  EncodeFixed64(b, 0x1122334455667788u);
  EXPECT_EQ(std::vector<uint8_t>(a, a + 8), std::vector<uint8_t>(b, b + 8));
  EXPECT_EQ(DecodeFixed<uint16_t>(a), DecodeFixed16(a));
  EXPECT_EQ(DecodeFixed<uint32_t>(a), DecodeFixed32(a));
  EXPECT_EQ(DecodeFixed<uint8_t>(a), 0x88);

  EncodeFixed(a, Color::kBlue);
  EXPECT_EQ(a[0], 200);
  EncodeFixed(a, Wide::kBig);
  EXPECT_EQ(DecodeFixed32(a), 0xa1b2c3d4u);
  EXPECT_EQ(DecodeFixed<Wide>(a), Wide::kBig);
  // Out-of-range bytes survive the round trip unchanged for the caller to
  // range-check.
  a[0] = 77;
  EXPECT_EQ(static_cast<uint8_t>(DecodeFixed<Color>(a)), 77);
}

// -------------------------------------------------------------- varints

TEST(CodingTest, VarintBoundariesHaveMinimalLengthsAndRoundTrip) {
  const std::vector<std::pair<uint32_t, size_t>> cases = {
      {0, 1},
      {1, 1},
      {127, 1},
      {128, 2},
      {16383, 2},
      {16384, 3},
      {(1u << 21) - 1, 3},
      {1u << 21, 4},
      {(1u << 28) - 1, 4},
      {1u << 28, 5},
      {0xffffffffu, 5},
  };
  for (const auto& [value, length] : cases) {
    SCOPED_TRACE(value);
    EXPECT_EQ(Varint32Length(value), length);
    const std::string enc = VarintOf(value);
    ASSERT_EQ(enc.size(), length);
    uint32_t back = 0;
    size_t consumed = 0;
    ASSERT_TRUE(DecodeAll(Bytes(enc), &back, &consumed).ok());
    EXPECT_EQ(back, value);
    EXPECT_EQ(consumed, length);
  }
  EXPECT_EQ(VarintOf(300), std::string("\xac\x02"));
  EXPECT_EQ(VarintOf(0xffffffffu), std::string("\xff\xff\xff\xff\x0f"));
}

TEST(CodingTest, RandomVarintsRoundTripThroughAString) {
  GRADWIRE_SEEDED_RNG(rng);
  std::vector<uint32_t> values;
  std::string buf;
  for (int i = 0; i < 5000; ++i) {
    // Spread over every length: a random width, then a random value in it.
    const uint32_t v = static_cast<uint32_t>(rng()) >> (rng() % 32);
    values.push_back(v);
    PutVarint32(&buf, v);
  }
  ByteReader r(buf, "random");
  for (uint32_t want : values) {
    uint32_t got = 0;
    ASSERT_TRUE(r.ReadVarint32("v", &got).ok());
    ASSERT_EQ(got, want);
  }
  EXPECT_TRUE(r.ExpectDone().ok());
}

// Every one- and two-byte input: accepted exactly when it is the minimal
// encoding of what it decodes to.
TEST(CodingTest, ExhaustivelyOnlyMinimalShortEncodingsAreAccepted) {
  int accepted = 0;
  for (int len = 1; len <= 2; ++len) {
    for (uint32_t bits = 0; bits < (1u << (8 * len)); ++bits) {
      std::vector<uint8_t> in(len);
      for (int i = 0; i < len; ++i) in[i] = static_cast<uint8_t>(bits >> (8 * i));
      uint32_t v = 0;
      size_t consumed = 0;
      const absl::Status s = DecodeAll(in, &v, &consumed);
      if (!s.ok()) continue;
      ++accepted;
      ASSERT_EQ(VarintOf(v), std::string(in.begin(), in.begin() + consumed))
          << "accepted a non-minimal encoding of " << v;
    }
  }
  // 128 one-byte values, alone and followed by any byte, plus the 128 * 127
  // two-byte values (second byte 1..127).
  EXPECT_EQ(accepted, 128 + 128 * 256 + 128 * 127);
}

TEST(CodingTest, NonMinimalTooLargeAndTruncatedVarintsAreRefused) {
  struct Case {
    std::vector<uint8_t> in;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{0x80, 0x00}, "overlong (2 bytes ending in 0x00"},
      {{0xff, 0x80, 0x00}, "overlong (3 bytes"},
      {{0x80, 0x80, 0x80, 0x80, 0x00}, "overlong (5 bytes"},
      {{0x80, 0x80, 0x80, 0x80, 0x10}, "exceeds 32 bits (fifth byte 0x10)"},
      {{0xff, 0xff, 0xff, 0xff, 0x1f}, "exceeds 32 bits"},
      {{0xff, 0xff, 0xff, 0xff, 0x8f, 0x01}, "exceeds 32 bits (fifth byte 0x8f)"},
      {{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, "exceeds 32 bits"},
      {{}, "at byte 0 runs past the end of the 0-byte input"},
      {{0x80}, "runs past the end of the 1-byte input"},
  };
  for (const Case& c : cases) {
    uint32_t v = 0;
    size_t consumed = 0;
    const absl::Status s = DecodeAll(c.in, &v, &consumed);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.why;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.why));
    EXPECT_THAT(std::string(s.message()), HasSubstr("test varint"));
  }
  uint32_t v = 0;
  size_t consumed = 0;
  ASSERT_TRUE(DecodeAll({0xff, 0xff, 0xff, 0xff, 0x0f}, &v, &consumed).ok());
  EXPECT_EQ(v, 0xffffffffu);
}

TEST(CodingTest, EveryTruncatedVarintIsRefusedWithoutConsuming) {
  for (uint32_t value : {128u, 16384u, 1u << 21, 1u << 28, 0xffffffffu}) {
    const std::vector<uint8_t> full = Bytes(VarintOf(value));
    for (size_t cut = 0; cut < full.size(); ++cut) {
      const std::vector<uint8_t> in(full.begin(), full.begin() + cut);
      uint32_t v = 0;
      size_t consumed = 0;
      const absl::Status s = DecodeAll(in, &v, &consumed);
      EXPECT_THAT(std::string(s.message()), HasSubstr("runs past the end"))
          << value << " cut at " << cut;
    }
  }
  // Not at the start of the input: the offset reported is the varint's.
  const std::vector<uint8_t> in = {0x05, 0x80, 0x80};
  size_t pos = 1;
  uint32_t v = 0;
  const absl::Status s = DecodeVarint32(in, &pos, &v, "second");
  EXPECT_THAT(std::string(s.message()), HasSubstr("second at byte 1 runs past the end"));
  EXPECT_EQ(pos, 1u);
}

TEST(CodingTest, EncodeVarintIntoATooSmallSpanWritesNothing) {
  uint8_t buf[5] = {9, 9, 9, 9, 9};
  size_t pos = 2;
  EXPECT_FALSE(EncodeVarint32(absl::MakeSpan(buf), &pos, 1u << 21));  // needs 4, 3 left
  EXPECT_EQ(pos, 2u);
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + 5), (std::vector<uint8_t>{9, 9, 9, 9, 9}));
  EXPECT_TRUE(EncodeVarint32(absl::MakeSpan(buf), &pos, 16384));  // exactly 3
  EXPECT_EQ(pos, 5u);
  pos = 6;  // past the end
  EXPECT_FALSE(EncodeVarint32(absl::MakeSpan(buf), &pos, 0));
}

// ---------------------------------------------------------- ByteReader

// One of each field kind, written with the Put functions.
std::string Record() {
  std::string out;
  PutFixed16(&out, 0x1234);
  PutFixed32(&out, 0x89abcdefu);
  PutVarint32(&out, 300);
  PutLengthPrefixed32(&out, "payload");
  PutFixed64(&out, 42);
  PutBytes(&out, "tail");
  return out;
}

// Reads Record()'s fields; stops at the first failure, leaving *failed_at
// the position of the reader when it failed.
absl::Status ReadRecord(ByteReader& r, size_t* failed_at) {
  uint16_t a = 0;
  uint32_t b = 0, c = 0;
  uint64_t d = 0;
  absl::string_view e, f;
  absl::Status s;
  if (s = r.ReadFixed16("field a", &a); s.ok() && a != 0x1234) s = r.Error("a");
  if (s.ok() && (s = r.ReadFixed32("field b", &b)).ok() && b != 0x89abcdefu) s = r.Error("b");
  if (s.ok() && (s = r.ReadVarint32("field c", &c)).ok() && c != 300) s = r.Error("c");
  if (s.ok() && (s = r.ReadLengthPrefixed32("field e", &e)).ok() && e != "payload") {
    s = r.Error("e");
  }
  if (s.ok() && (s = r.ReadFixed64("field d", &d)).ok() && d != 42) s = r.Error("d");
  if (s.ok() && (s = r.ReadBytes("field f", 4, &f)).ok() && f != "tail") s = r.Error("f");
  if (s.ok()) s = r.ExpectDone();
  *failed_at = r.position();
  return s;
}

TEST(ByteReaderTest, ReadsARecordExactly) {
  const std::string rec = Record();
  ByteReader r(rec, "record");
  size_t at = 0;
  const absl::Status s = ReadRecord(r, &at);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(r.done());
  EXPECT_EQ(at, rec.size());
}

// Cut the record at every offset: the read fails in the field the cut
// falls in, names it and the context, and the reader stays at that
// field's first byte (nothing of a failed field is consumed).
TEST(ByteReaderTest, TruncationAtEveryOffsetFailsAtTheCutField) {
  const std::string rec = Record();
  // Field starts: a@0 (2), b@2 (4), c@6 (2), e@8 (4+7), d@19 (8), f@27 (4).
  const std::vector<std::pair<size_t, const char*>> fields = {{0, "field a"},  {2, "field b"},
                                                              {6, "field c"},  {8, "field e"},
                                                              {19, "field d"}, {27, "field f"}};
  ASSERT_EQ(rec.size(), 31u);
  for (size_t cut = 0; cut < rec.size(); ++cut) {
    SCOPED_TRACE(cut);
    size_t k = fields.size() - 1;
    while (fields[k].first > cut) --k;
    // A cut exactly at a field's start fails in that field.
    const std::string prefix = rec.substr(0, cut);
    ByteReader r(prefix, "record");
    size_t at = 0;
    const absl::Status s = ReadRecord(r, &at);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("record: "));
    EXPECT_THAT(std::string(s.message()), HasSubstr(fields[k].second));
    EXPECT_EQ(at, fields[k].first);
  }
}

TEST(ByteReaderTest, TrailingBytesAndHostileLengthsAreRefused) {
  std::string rec = Record() + "x";
  ByteReader r(rec, "record");
  size_t at = 0;
  const absl::Status s = ReadRecord(r, &at);
  EXPECT_THAT(std::string(s.message()), HasSubstr("record: 1 trailing bytes after byte 31"));

  // A length prefix far beyond the input (and beyond any allocation).
  std::string huge;
  PutFixed32(&huge, 0xffffffffu);
  huge += "abc";
  ByteReader h(huge, "huge");
  absl::string_view v;
  EXPECT_THAT(std::string(h.ReadLengthPrefixed32("name", &v).message()),
              HasSubstr("truncated reading name at byte 4 (4294967295 bytes needed, 3 left"));
  EXPECT_EQ(h.position(), 0u);
  EXPECT_FALSE(h.ReadBytes("n", std::numeric_limits<uint64_t>::max(), &v).ok());
  EXPECT_FALSE(h.Skip("n", 8).ok());
  EXPECT_EQ(h.position(), 0u);
  EXPECT_TRUE(h.Skip("n", 7).ok());
  EXPECT_TRUE(h.ExpectDone().ok());
  EXPECT_THAT(std::string(h.Error("bad value 7").message()),
              HasSubstr("huge: bad value 7 at byte 7"));
}

}  // namespace
}  // namespace gradwire
