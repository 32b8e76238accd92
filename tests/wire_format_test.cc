// Tests for lib/wire_format: the byte layout is pinned (a golden frame), a
// valid frame round-trips, and every malformed frame is refused with its
// own status code and message. Hostile frames are built by patching bytes
// and recomputing the checksum here (XXH3-64, as the grammar says), so each
// field check is reached rather than hidden behind a checksum mismatch.
#include "gradwire/lib/codec/wire_format.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/expect_rejected.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

void PutU64(std::vector<uint8_t>& f, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) f[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetU64(const std::vector<uint8_t>& f, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{f[at + i]} << (8 * i);
  return v;
}

// Recomputes the trailing checksum independently of the library.
void Reseal(std::vector<uint8_t>& f) {
  ASSERT_GE(f.size(), 80u);
  PutU64(f, f.size() - 8, XXH3_64bits(f.data(), f.size() - 8));
}

struct Sections {
  std::vector<uint8_t> indices, scales, values;
};

// Builds a frame through the public writer API.
std::vector<uint8_t> BuildFrame(FrameHeader h, const Sections& s) {
  h.index_bytes = s.indices.size();
  h.scale_bytes = s.scales.size();
  h.value_bytes = s.values.size();
  std::vector<uint8_t> out(FrameBytes(h));
  auto sections = StartFrame(h, absl::MakeSpan(out));
  EXPECT_TRUE(sections.ok()) << sections.status();
  if (!sections.ok()) return {};
  std::copy(s.indices.begin(), s.indices.end(), sections->indices.begin());
  std::copy(s.scales.begin(), s.scales.end(), sections->scales.begin());
  std::copy(s.values.begin(), s.values.end(), sections->values.begin());
  auto sealed = SealFrame(absl::MakeSpan(out));
  EXPECT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(*sealed, out.size());
  return out;
}

// A small valid top-k frame: 3 raw u32 indices, 3 fp32 values.
FrameHeader TopKHeader() {
  FrameHeader h;
  h.codec = CodecId::kTopK;
  h.value_type = ValueType::kFp32;
  h.index_encoding = IndexEncoding::kRawU32;
  h.flags = kFlagErrorFeedback;
  h.dense_length = 100;
  h.element_count = 3;
  h.step = 0x0102030405060708;
  h.seed = 0x1112131415161718;
  return h;
}

std::vector<uint8_t> TopKFrame() {
  Sections s;
  s.indices = {1, 0, 0, 0, 7, 0, 0, 0, 99, 0, 0, 0};
  s.values = std::vector<uint8_t>(12, 0x3f);
  return BuildFrame(TopKHeader(), s);
}

absl::Status Parse(const std::vector<uint8_t>& f, FrameLimits limits = {}) {
  return ParseFrame(absl::MakeConstSpan(f), limits).status();
}

// ---------------------------------------------------------------- layout

TEST(WireFormatTest, GoldenLayoutIsLittleEndianAtDocumentedOffsets) {
  const std::vector<uint8_t> f = TopKFrame();
  ASSERT_EQ(f.size(), 72u + 12 + 0 + 12 + 8);
  EXPECT_EQ(std::string(f.begin(), f.begin() + 4), "GWF1");
  EXPECT_EQ(f[4], 1);   // version
  EXPECT_EQ(f[5], 3);   // codec top-k
  EXPECT_EQ(f[6], 0);   // fp32
  EXPECT_EQ(f[7], 1);   // raw u32
  EXPECT_EQ(f[8], 0);   // quant_bits
  EXPECT_EQ(f[9], 1);   // flags: error feedback
  EXPECT_EQ(f[10], 0);  // reserved
  EXPECT_EQ(f[11], 0);
  EXPECT_EQ(GetU64(f, 16), 100u);  // dense_length
  EXPECT_EQ(GetU64(f, 24), 3u);    // element_count
  EXPECT_EQ(f[32], 0x08);          // step, least significant byte first
  EXPECT_EQ(f[39], 0x01);
  EXPECT_EQ(GetU64(f, 40), 0x1112131415161718u);
  EXPECT_EQ(GetU64(f, 48), 12u);  // index_bytes
  EXPECT_EQ(GetU64(f, 56), 0u);   // scale_bytes
  EXPECT_EQ(GetU64(f, 64), 12u);  // value_bytes
  EXPECT_EQ(f[72], 1);            // first index
  EXPECT_EQ(f[76], 7);
  EXPECT_EQ(GetU64(f, f.size() - 8), XXH3_64bits(f.data(), f.size() - 8));
}

TEST(WireFormatTest, FrameBytesSumsSectionsAndSaturates) {
  FrameHeader h;
  EXPECT_EQ(FrameBytes(h), 80u);
  h.index_bytes = 1;
  h.scale_bytes = 2;
  h.value_bytes = 3;
  EXPECT_EQ(FrameBytes(h), 86u);
  h.value_bytes = kU64Max - 50;
  EXPECT_EQ(FrameBytes(h), kU64Max);
}

// ------------------------------------------------------------ round trip

TEST(WireFormatTest, RandomHeadersAndSectionsRoundTrip) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 500; ++iter) {
    FrameHeader h;
    h.codec = static_cast<CodecId>(rng() % (kMaxCodecId + 1));
    h.value_type = static_cast<ValueType>(rng() % (kMaxValueType + 1));
    h.index_encoding = static_cast<IndexEncoding>(rng() % (kMaxIndexEncoding + 1));
    h.quant_bits = h.value_type == ValueType::kPacked ? 1 + rng() % 8 : 0;
    h.flags = (rng() % 2 ? kFlagErrorFeedback : 0) | (rng() % 2 ? kFlagNonFinite : 0);
    h.bucket_size = static_cast<uint32_t>(rng());
    h.dense_length = rng() % (uint64_t{1} << 32);
    h.element_count = h.dense_length ? rng() % (h.dense_length + 1) : 0;
    h.step = rng();
    h.seed = rng();
    Sections s;
    auto fill = [&](std::vector<uint8_t>& v) {
      v.resize(rng() % 64);
      for (auto& b : v) b = static_cast<uint8_t>(rng());
    };
    if (h.index_encoding != IndexEncoding::kNone) fill(s.indices);
    fill(s.scales);
    fill(s.values);
    const std::vector<uint8_t> f = BuildFrame(h, s);
    ASSERT_FALSE(f.empty());
    auto parsed = ParseFrame(absl::MakeConstSpan(f), FrameLimits{});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const FrameHeader& g = parsed->header;
    EXPECT_EQ(g.codec, h.codec);
    EXPECT_EQ(g.value_type, h.value_type);
    EXPECT_EQ(g.index_encoding, h.index_encoding);
    EXPECT_EQ(g.quant_bits, h.quant_bits);
    EXPECT_EQ(g.flags, h.flags);
    EXPECT_EQ(g.bucket_size, h.bucket_size);
    EXPECT_EQ(g.dense_length, h.dense_length);
    EXPECT_EQ(g.element_count, h.element_count);
    EXPECT_EQ(g.step, h.step);
    EXPECT_EQ(g.seed, h.seed);
    auto same = [](absl::Span<const uint8_t> a, const std::vector<uint8_t>& b) {
      return std::vector<uint8_t>(a.begin(), a.end()) == b;
    };
    EXPECT_TRUE(same(parsed->sections.indices, s.indices));
    EXPECT_TRUE(same(parsed->sections.scales, s.scales));
    EXPECT_TRUE(same(parsed->sections.values, s.values));
    // Views point into the frame, in section order, right after the header.
    EXPECT_EQ(parsed->sections.indices.data(), f.data() + 72);
  }
}

TEST(WireFormatTest, EmptyFrameIsValid) {
  FrameHeader h;  // dense, n = 0: an empty tensor is legal
  const std::vector<uint8_t> f = BuildFrame(h, {});
  ASSERT_EQ(f.size(), 80u);
  EXPECT_TRUE(Parse(f).ok());
}

// ------------------------------------------------------ damaged frames

TEST(WireFormatTest, EveryTruncationIsRejected) {
  const std::vector<uint8_t> f = TopKFrame();
  for (size_t len = 0; len < f.size(); ++len) {
    std::vector<uint8_t> cut(f.begin(), f.begin() + len);
    const absl::Status s = Parse(cut);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "len " << len << ": " << s;
    if (len < 80) {
      EXPECT_THAT(std::string(s.message()), HasSubstr("truncated")) << len;
    } else {
      EXPECT_THAT(std::string(s.message()), HasSubstr("exceeds")) << len;
    }
  }
}

TEST(WireFormatTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> f = TopKFrame();
  f.push_back(0);
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "1 trailing bytes");
}

TEST(WireFormatTest, EverySingleBitFlipIsRejected) {
  const std::vector<uint8_t> f = TopKFrame();
  ASSERT_TRUE(Parse(f).ok());
  for (size_t bit = 0; bit < f.size() * 8; ++bit) {
    std::vector<uint8_t> g = f;
    g[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const absl::Status s = Parse(g);
    ASSERT_FALSE(s.ok()) << "flip of bit " << bit << " accepted";
    if (bit / 8 >= 72) {
      // Sections and checksum are guarded by the checksum alone.
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << bit << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("checksum mismatch"));
    } else {
      EXPECT_TRUE(s.code() == absl::StatusCode::kDataLoss ||
                  s.code() == absl::StatusCode::kInvalidArgument)
          << bit << ": " << s;
    }
  }
}

// ------------------------------------------------------- field checks

struct FieldCase {
  const char* name;
  void (*patch)(std::vector<uint8_t>&);
  const char* message;
};

TEST(WireFormatTest, EachBadFieldHasItsOwnMessage) {
  const FieldCase cases[] = {
      {"magic", [](auto& f) { f[0] = 'X'; }, "bad magic"},
      {"version 0", [](auto& f) { f[4] = 0; }, "unsupported version 0"},
      {"version 2", [](auto& f) { f[4] = 2; }, "unsupported version 2 for codec id 3"},
      {"version 3", [](auto& f) { f[4] = 3; }, "unsupported version 3"},
      {"codec", [](auto& f) { f[5] = 8; }, "unknown codec id 8"},
      {"codec 255", [](auto& f) { f[5] = 255; }, "unknown codec id 255"},
      {"value_type", [](auto& f) { f[6] = 4; }, "unknown value_type 4"},
      {"index_encoding", [](auto& f) { f[7] = 3; }, "unknown index_encoding 3"},
      {"quant_bits on fp32", [](auto& f) { f[8] = 4; }, "quant_bits 4 must be 0"},
      {"packed quant_bits 0", [](auto& f) { f[6] = 3; }, "quant_bits 0 out of range 1..8"},
      {"packed quant_bits 9",
       [](auto& f) {
         f[6] = 3;
         f[8] = 9;
       },
       "quant_bits 9 out of range 1..8"},
      {"reserved low", [](auto& f) { f[10] = 1; }, "reserved field is 0x1"},
      {"reserved high", [](auto& f) { f[11] = 0x80; }, "reserved field is 0x8000"},
      {"flags", [](auto& f) { f[9] = 0x81; }, "unknown flag bits 0x80"},
      {"element_count", [](auto& f) { PutU64(f, 24, 101); },
       "element_count 101 exceeds dense_length 100"},
      {"index bytes with none", [](auto& f) { f[7] = 0; },
       "index_bytes 12 with index_encoding none"},
  };
  for (const FieldCase& c : cases) {
    std::vector<uint8_t> f = TopKFrame();
    c.patch(f);
    Reseal(f);
    SCOPED_TRACE(c.name);
    EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, c.message);
  }
}

// Random-k frames are version 2 (indices from the 32-bit element hash);
// a version-1 random-k frame, from a build on the old hash, is refused by
// name instead of decoding to the wrong indices.
std::vector<uint8_t> RandomKFrame() {
  FrameHeader h;
  h.codec = CodecId::kRandomK;
  h.value_type = ValueType::kFp32;
  h.index_encoding = IndexEncoding::kNone;
  h.dense_length = 100;
  h.element_count = 2;
  h.step = 5;
  h.seed = 77;
  Sections s;
  s.values = std::vector<uint8_t>(8, 0x3f);
  return BuildFrame(h, s);
}

// QSGD frames are version 2 (levels (2q - M) * step, element_math.h); a
// version-1 QSGD frame, whose codes mean RN(RN((2q - M) / M) * s), is
// refused by name too.
std::vector<uint8_t> QsgdFrame() {
  FrameHeader h;
  h.codec = CodecId::kQsgd;
  h.value_type = ValueType::kPacked;
  h.index_encoding = IndexEncoding::kNone;
  h.quant_bits = 8;
  h.bucket_size = 64;
  h.dense_length = 100;
  h.element_count = 100;
  Sections s;
  s.scales = std::vector<uint8_t>(8, 0);
  s.values = std::vector<uint8_t>(100, 0x80);
  return BuildFrame(h, s);
}

TEST(WireFormatTest, RandomKAndQsgdFramesAreVersion2AndVersion1IsRefused) {
  struct Case {
    std::vector<uint8_t> frame;
    const char* refusal;
  };
  const Case cases[] = {
      {RandomKFrame(), "random-k frame of version 1"},  // a build on the old hash
      {QsgdFrame(), "qsgd frame of version 1"},         // a build on the old levels
  };
  EXPECT_EQ(kRandomKFrameVersion, 2);
  EXPECT_EQ(kQsgdFrameVersion, 2);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.refusal);
    std::vector<uint8_t> f = c.frame;
    ASSERT_FALSE(f.empty());
    EXPECT_EQ(f[4], 2);
    EXPECT_TRUE(Parse(f).ok()) << Parse(f);
    f[4] = 1;
    Reseal(f);
    EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, c.refusal);
    EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "Run one gradwire build");
  }
  // The other codecs stay version 1, and refuse version 2.
  for (uint8_t c = 0; c <= kMaxCodecId; ++c) {
    if (c == static_cast<uint8_t>(CodecId::kRandomK) || c == static_cast<uint8_t>(CodecId::kQsgd)) {
      EXPECT_EQ(FrameVersionFor(static_cast<CodecId>(c)), 2) << int{c};
    } else {
      EXPECT_EQ(FrameVersionFor(static_cast<CodecId>(c)), 1) << int{c};
    }
  }
  std::vector<uint8_t> top = TopKFrame();
  top[4] = 2;
  Reseal(top);
  EXPECT_REJECTED(Parse(top), absl::StatusCode::kInvalidArgument, "unsupported version 2");
}

TEST(WireFormatTest, ValidationOrderIsMagicBeforeVersionBeforeEnums) {
  std::vector<uint8_t> f = TopKFrame();
  f[5] = 200;  // bad codec
  f[4] = 9;    // bad version
  Reseal(f);
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "version");
  f[0] = 0;  // bad magic too
  Reseal(f);
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "magic");
}

TEST(WireFormatTest, FieldChecksPrecedeChecksum) {
  // A corrupted header field is named even when the checksum is stale too:
  // the message should say what is wrong, not just "corrupt".
  std::vector<uint8_t> f = TopKFrame();
  f[5] = 99;
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "unknown codec id 99");
}

// ------------------------------------------------------------- limits

TEST(WireFormatTest, DenseLengthCapIsEnforced) {
  const std::vector<uint8_t> f = TopKFrame();
  FrameLimits limits;
  limits.max_dense_length = 100;
  EXPECT_TRUE(Parse(f, limits).ok());
  limits.max_dense_length = 99;
  EXPECT_REJECTED(Parse(f, limits), absl::StatusCode::kInvalidArgument,
                  "dense_length 100 exceeds the receiver's max_dense_length 99");
}

TEST(WireFormatTest, FrameBytesCapIsEnforced) {
  const std::vector<uint8_t> f = TopKFrame();
  FrameLimits limits;
  limits.max_frame_bytes = f.size();
  EXPECT_TRUE(Parse(f, limits).ok());
  limits.max_frame_bytes = f.size() - 1;
  EXPECT_REJECTED(Parse(f, limits), absl::StatusCode::kInvalidArgument,
                  "frame length 104 exceeds the receiver's max_frame_bytes 103");
}

TEST(WireFormatTest, HugeDenseLengthWithinCapIsRejectedByDefaultLimits) {
  std::vector<uint8_t> f = TopKFrame();
  PutU64(f, 16, kU64Max);
  Reseal(f);
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, "max_dense_length 4294967296");
}

// Section lengths chosen so that their u64 sum wraps around to exactly the
// real body length: a parser that adds before comparing would accept them.
TEST(WireFormatTest, OverflowingSectionLengthsAreRejected) {
  const std::vector<uint8_t> base = TopKFrame();  // body = 24 bytes
  struct Case {
    uint64_t index, scale, value;
    const char* message;
  } cases[] = {
      {kU64Max, 25, 0, "index_bytes 18446744073709551615 exceeds the 24 bytes"},
      {12, kU64Max - 11, 24, "scale_bytes 18446744073709551604 exceeds the 12 bytes left"},
      {12, 12, kU64Max, "value_bytes 18446744073709551615 exceeds the 0 bytes left"},
      {0, uint64_t{1} << 63, (uint64_t{1} << 63) + 24, "scale_bytes 9223372036854775808 exceeds"},
      {24, 0, kU64Max - 23, "value_bytes 18446744073709551592 exceeds the 0 bytes left"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> f = base;
    PutU64(f, 48, c.index);
    PutU64(f, 56, c.scale);
    PutU64(f, 64, c.value);
    Reseal(f);
    SCOPED_TRACE(c.message);
    EXPECT_REJECTED(Parse(f), absl::StatusCode::kInvalidArgument, c.message);
  }
}

TEST(WireFormatTest, ChecksumMismatchIsDataLoss) {
  std::vector<uint8_t> f = TopKFrame();
  f[f.size() - 1] ^= 0xff;
  EXPECT_REJECTED(Parse(f), absl::StatusCode::kDataLoss, "checksum mismatch");
}

// -------------------------------------------------------------- writer

TEST(WireFormatTest, StartFrameRefusesWhatParseFrameWould) {
  std::vector<uint8_t> out(4096);
  FrameHeader h = TopKHeader();
  h.quant_bits = 3;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "quant_bits 3 must be 0");
  h = TopKHeader();
  h.codec = static_cast<CodecId>(42);
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "unknown codec id 42");
  h = TopKHeader();
  h.flags = 0x40;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "unknown flag bits 0x40");
  h = TopKHeader();
  h.element_count = 101;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "element_count 101 exceeds");
  h = TopKHeader();
  h.index_encoding = IndexEncoding::kNone;
  h.index_bytes = 4;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "index_encoding none");
  h = TopKHeader();
  h.index_bytes = kU64Max;
  h.value_bytes = 100;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "overflow");
  h = TopKHeader();
  h.value_bytes = 4096;
  EXPECT_REJECTED(StartFrame(h, absl::MakeSpan(out)).status(), absl::StatusCode::kInvalidArgument,
                  "output buffer of 4096 bytes is smaller than the 4176-byte frame");
}

TEST(WireFormatTest, SealFrameRevalidatesTheBufferHeader) {
  std::vector<uint8_t> small(10);
  EXPECT_REJECTED(SealFrame(absl::MakeSpan(small)).status(), absl::StatusCode::kInvalidArgument,
                  "shorter than the 72-byte header");
  std::vector<uint8_t> f = TopKFrame();
  f[0] = 0;  // header overwritten after StartFrame
  EXPECT_REJECTED(SealFrame(absl::MakeSpan(f)).status(), absl::StatusCode::kInvalidArgument,
                  "bad magic");
  f = TopKFrame();
  std::vector<uint8_t> cut(f.begin(), f.end() - 1);
  EXPECT_REJECTED(SealFrame(absl::MakeSpan(cut)).status(), absl::StatusCode::kInvalidArgument,
                  "output buffer of 103 bytes");
}

TEST(WireFormatTest, SealedFrameInLargerBufferParsesAtItsLength) {
  FrameHeader h = TopKHeader();
  h.index_bytes = 12;
  h.value_bytes = 12;
  std::vector<uint8_t> out(1000, 0xee);
  auto sections = StartFrame(h, absl::MakeSpan(out));
  ASSERT_TRUE(sections.ok());
  const uint32_t idx[] = {1, 2, 3};
  ASSERT_TRUE(EncodeIndices(IndexEncoding::kRawU32, idx, sections->indices).ok());
  auto len = SealFrame(absl::MakeSpan(out));
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 104u);
  EXPECT_TRUE(ParseFrame(absl::MakeConstSpan(out.data(), *len), FrameLimits{}).ok());
}

// --------------------------------------------------------- robustness

// Random mutations of valid frames, half of them resealed so they get past
// the checksum: nothing crashes, and whatever parses has consistent views.
TEST(WireFormatTest, RandomMutationsNeverCrash) {
  std::mt19937_64 rng(1234);
  const std::vector<uint8_t> base = TopKFrame();
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> f = base;
    const int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0:
          f[rng() % f.size()] = static_cast<uint8_t>(rng());
          break;
        case 1:
          PutU64(f, 16 + 8 * (rng() % 7), rng() % 2 ? rng() : rng() % 64);
          break;
        case 2:
          f.resize(80 + rng() % 64);
          break;
      }
    }
    if (rng() % 2) Reseal(f);
    auto parsed = ParseFrame(absl::MakeConstSpan(f), FrameLimits{});
    if (!parsed.ok()) continue;
    ++accepted;
    const FrameSections& s = parsed->sections;
    ASSERT_EQ(72 + s.indices.size() + s.scales.size() + s.values.size() + 8, f.size());
    std::vector<uint32_t> idx(std::min<uint64_t>(parsed->header.element_count, 64));
    (void)DecodeIndices(parsed->header.index_encoding, s.indices, parsed->header.dense_length,
                        absl::MakeSpan(idx));
  }
  EXPECT_GT(accepted, 0);  // the resealed half does reach the deep checks
}

}  // namespace
}  // namespace gradwire
