// Tests for the index section of a frame (lib/codec/index_coding.cc,
// declared in wire_format.h): raw u32 and delta-varint indices round-trip,
// varints have their minimal lengths, the fast paths (sixteen, eight and
// four gaps at a time, both ways) give the one-at-a-time bytes and
// indices, and every malformed list is refused naming the bad index.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gradwire/lib/codec/wire_format.h"
#include "gtest/gtest.h"
#include "tests/expect_rejected.h"

namespace gradwire {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

std::vector<uint8_t> Encode(IndexEncoding e, const std::vector<uint32_t>& idx) {
  std::vector<uint8_t> out(MaxIndexBytes(e, idx.size()));
  auto n = EncodeIndices(e, idx, absl::MakeSpan(out));
  EXPECT_TRUE(n.ok()) << n.status();
  out.resize(n.ok() ? *n : 0);
  return out;
}

absl::Status Decode(IndexEncoding e, const std::vector<uint8_t>& in, uint64_t n, size_t count) {
  std::vector<uint32_t> out(count);
  return DecodeIndices(e, in, n, absl::MakeSpan(out));
}

TEST(IndexEncodingTest, RandomIndicesRoundTripInBothEncodings) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    const uint64_t n = 1 + rng() % (iter % 2 ? 1000 : (uint64_t{1} << 32));
    std::vector<uint32_t> idx;
    const size_t want = rng() % 300;
    for (size_t i = 0; i < want; ++i) idx.push_back(static_cast<uint32_t>(rng() % n));
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    for (IndexEncoding e : {IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint}) {
      const std::vector<uint8_t> bytes = Encode(e, idx);
      EXPECT_LE(bytes.size(), MaxIndexBytes(e, idx.size()));
      std::vector<uint32_t> back(idx.size());
      ASSERT_TRUE(DecodeIndices(e, bytes, n, absl::MakeSpan(back)).ok());
      EXPECT_EQ(back, idx);
    }
  }
}

TEST(IndexEncodingTest, VarintEdgeValuesHaveMinimalLengths) {
  const uint64_t n = uint64_t{1} << 32;
  const struct {
    uint32_t first;
    size_t bytes;
  } cases[] = {{0, 1},        {127, 1},
               {128, 2},      {16383, 2},
               {16384, 3},    {(1u << 21) - 1, 3},
               {1u << 21, 4}, {(1u << 28) - 1, 4},
               {1u << 28, 5}, {0xffffffffu, 5}};
  for (const auto& c : cases) {
    const std::vector<uint8_t> bytes = Encode(IndexEncoding::kDeltaVarint, {c.first});
    EXPECT_EQ(bytes.size(), c.bytes) << c.first;
    std::vector<uint32_t> back(1);
    ASSERT_TRUE(DecodeIndices(IndexEncoding::kDeltaVarint, bytes, n, absl::MakeSpan(back)).ok());
    EXPECT_EQ(back[0], c.first);
  }
  // Adjacent indices cost one zero byte each: gaps are stored minus one.
  EXPECT_EQ(Encode(IndexEncoding::kDeltaVarint, {5, 6, 7}), (std::vector<uint8_t>{5, 0, 0}));
  EXPECT_EQ(Encode(IndexEncoding::kDeltaVarint, {0, 0xffffffffu}),
            (std::vector<uint8_t>{0, 0xfe, 0xff, 0xff, 0xff, 0x0f}));
}

TEST(IndexEncodingTest, MalformedVarintsAreRejected) {
  const uint64_t n = uint64_t{1} << 33;  // so only u32 range limits apply
  const auto kVarint = IndexEncoding::kDeltaVarint;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_REJECTED(Decode(kVarint, {0x80, 0x00}, n, 1), kInvalid, "overlong");
  EXPECT_REJECTED(Decode(kVarint, {0xff, 0x80, 0x00}, n, 1), kInvalid, "overlong");
  EXPECT_REJECTED(Decode(kVarint, {0x80, 0x80, 0x80, 0x80, 0x10}, n, 1), kInvalid,
                  "exceeds 32 bits");
  EXPECT_REJECTED(Decode(kVarint, {0xff, 0xff, 0xff, 0xff, 0x8f, 0x00}, n, 1), kInvalid,
                  "exceeds 32 bits");
  EXPECT_REJECTED(Decode(kVarint, {0x80}, n, 1), kInvalid, "runs past the end");
  EXPECT_REJECTED(Decode(kVarint, {0x01, 0x80}, n, 2), kInvalid, "varint #1 at byte 1 runs past");
  EXPECT_REJECTED(Decode(kVarint, {1, 2, 3}, n, 2), kInvalid, "1 trailing bytes");
  EXPECT_REJECTED(Decode(kVarint, {1}, n, 2), kInvalid, "1 bytes cannot hold 2 indices");
  // First index u32 max, next gap 0: 2^32 does not fit an index.
  EXPECT_REJECTED(Decode(kVarint, {0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}, n, 2), kInvalid,
                  "index #1 = 4294967296 is not below dense_length 8589934592 (and exceeds u32)");
  EXPECT_REJECTED(Decode(kVarint, {5, 0, 3}, 10, 3), kInvalid,
                  "index #2 = 10 is not below dense_length 10");
  EXPECT_TRUE(Decode(kVarint, {5, 0, 2}, 10, 3).ok());
  EXPECT_TRUE(Decode(kVarint, {}, 0, 0).ok());
}

// After an index, a jump of min + rng() % span further elements one time
// in one_in.
struct LongGap {
  uint64_t one_in, min, span;
};

// Indices in [start, n), each kept one time in `density`, with long gaps
// now and then; n - 1 itself is kept now and then too.
std::vector<uint32_t> RandomIndices(uint64_t start, uint64_t n, uint64_t density, LongGap gap,
                                    std::mt19937_64& rng) {
  std::vector<uint32_t> idx;
  for (uint64_t i = start; i < n; ++i) {
    if (rng() % density == 0 || (rng() % 997 == 0 && i + 1 == n)) {
      idx.push_back(static_cast<uint32_t>(i));
      if (rng() % gap.one_in == 0) i += gap.min + rng() % gap.span;
    }
  }
  return idx;
}

// A delta-varint list of indices below n (kept one in `density`)
// round-trips, and with dense_length cut to a random m-th index, that
// index is the first refused, named exactly.
void DeltaVarintRoundTripAndCut(const std::vector<uint32_t>& idx, uint64_t n, uint64_t density,
                                std::mt19937_64& rng) {
  const std::vector<uint8_t> bytes = Encode(IndexEncoding::kDeltaVarint, idx);
  std::vector<uint32_t> back(idx.size());
  ASSERT_TRUE(DecodeIndices(IndexEncoding::kDeltaVarint, bytes, n, absl::MakeSpan(back)).ok());
  ASSERT_EQ(back, idx) << "n " << n << " density 1/" << density;
  if (idx.size() > 20 && idx.back() > 0) {
    const size_t m = 1 + rng() % (idx.size() - 1);
    EXPECT_REJECTED(
        DecodeIndices(IndexEncoding::kDeltaVarint, bytes, idx[m], absl::MakeSpan(back)),
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("index #", m, " = ", idx[m], " is not below dense_length ", idx[m]));
  }
}

// Dense selections decode sixteen (or eight) one-byte gaps at a time: runs of them
// broken by longer gaps at every offset within a group of eight, up to
// the last index below n, and out-of-range indices inside such a run are
// still named exactly.
TEST(IndexEncodingTest, DenseRunsOfOneByteGapsRoundTrip) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    const uint64_t n = iter % 3 == 0 ? (uint64_t{1} << 32) : 1 + rng() % 20000;
    const uint64_t start = n > 100000 ? n - 100000 : 0;
    const uint64_t density = 1 + rng() % 64;  // one in 1..64 kept
    // Now and then a two- or three-byte gap.
    const std::vector<uint32_t> idx = RandomIndices(start, n, density, {50, 128, 20000}, rng);
    ASSERT_NO_FATAL_FAILURE(DeltaVarintRoundTripAndCut(idx, n, density, rng));
  }
  // Eight zero gaps after 2^32 - 9 end at u32 max; after 2^32 - 8 the
  // last would be 2^32.
  const std::vector<uint8_t> fits = {0xf7, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(Decode(IndexEncoding::kDeltaVarint, fits, uint64_t{1} << 33, 9).ok());
  const std::vector<uint8_t> wraps = {0xf8, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_REJECTED(Decode(IndexEncoding::kDeltaVarint, wraps, uint64_t{1} << 33, 9),
                  absl::StatusCode::kInvalidArgument,
                  "index #8 = 4294967296 is not below dense_length 8589934592 (and exceeds u32)");
  // The same edge for sixteen zero gaps, after 2^32 - 17 and 2^32 - 16.
  std::vector<uint8_t> fits16 = {0xef, 0xff, 0xff, 0xff, 0x0f};
  fits16.resize(5 + 16, 0);
  EXPECT_TRUE(Decode(IndexEncoding::kDeltaVarint, fits16, uint64_t{1} << 33, 17).ok());
  std::vector<uint8_t> wraps16 = {0xf0, 0xff, 0xff, 0xff, 0x0f};
  wraps16.resize(5 + 16, 0);
  EXPECT_REJECTED(Decode(IndexEncoding::kDeltaVarint, wraps16, uint64_t{1} << 33, 17),
                  absl::StatusCode::kInvalidArgument,
                  "index #16 = 4294967296 is not below dense_length 8589934592 (and exceeds u32)");
}

// The bytes docs/wire_format.md defines for a delta-varint list, one
// index at a time: the reference the encoder's sixteen-at-a-time path
// must match.
std::vector<uint8_t> ReferenceDeltaVarint(const std::vector<uint32_t>& idx) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < idx.size(); ++i) {
    uint32_t v = i == 0 ? idx[0] : idx[i] - idx[i - 1] - 1;
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<uint8_t>(v | 0x80));
    out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

// Dense selections also encode sixteen one-byte gaps at a time: the bytes
// equal the reference's with the gaps at the one-byte edge (a gap of 128,
// stored as 127, and of 129, stored in two bytes) at every offset of a
// run; a repeat or a step back inside a long run is named at exactly its
// index; an output that fills up inside a run is refused, not overrun.
TEST(IndexEncodingTest, DenseRunsEncodeAsTheReferenceAndNameErrors) {
  std::mt19937_64 rng(17);
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<uint32_t> idx;
    uint32_t at = static_cast<uint32_t>(rng() % 1000);
    const size_t count = 1 + rng() % 200;
    for (size_t i = 0; i < count; ++i) {
      idx.push_back(at);
      const uint64_t r = rng() % 100;
      at += r < 3   ? 128
            : r < 6 ? 129
            : r < 8 ? 1 + static_cast<uint32_t>(rng() % 100000)
                    : 1 + static_cast<uint32_t>(rng() % 8);
    }
    EXPECT_EQ(Encode(IndexEncoding::kDeltaVarint, idx), ReferenceDeltaVarint(idx)) << iter;
  }
  std::vector<uint32_t> run(64);
  for (size_t i = 0; i < run.size(); ++i) run[i] = static_cast<uint32_t>(3 * i + 1);
  std::vector<uint8_t> out(MaxIndexBytes(IndexEncoding::kDeltaVarint, run.size()));
  for (size_t j = 17; j < run.size(); ++j) {
    for (uint32_t bad : {run[j - 1], run[j - 1] - 1, 0u}) {
      std::vector<uint32_t> broken = run;
      broken[j] = bad;
      EXPECT_REJECTED(
          EncodeIndices(IndexEncoding::kDeltaVarint, broken, absl::MakeSpan(out)).status(),
          absl::StatusCode::kInvalidArgument,
          absl::StrCat("#", j, " (", bad, ") does not exceed #", j - 1, " ("));
    }
  }
  for (size_t cap = 17; cap < run.size(); ++cap) {
    EXPECT_REJECTED(
        EncodeIndices(IndexEncoding::kDeltaVarint, run, absl::MakeSpan(out.data(), cap)).status(),
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("too small for 64 delta-varint indices (full at #", cap));
  }
}

// Sparse selections encode each gap of one or two bytes without a branch
// on its length, storing two bytes where it may take one: the bytes equal
// the reference's for gaps at each length's edges (128 | 129, 16384 |
// 16385) mixed at random, in an output of exactly their length; every
// shorter output is refused; and no byte outside the output is written.
TEST(IndexEncodingTest, ShortGapsEncodeAsTheReferenceInsideTheirOutput) {
  std::mt19937_64 rng(29);
  constexpr uint8_t kCanary = 0xa5;
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<uint32_t> idx;
    uint32_t at = static_cast<uint32_t>(rng() % 300);
    const size_t count = 1 + rng() % 40;
    for (size_t i = 0; i < count; ++i) {
      idx.push_back(at);
      const uint32_t edges[] = {1, 2, 127, 128, 129, 130, 16384, 16385, 16386, 2000000};
      at += rng() % 3 == 0 ? edges[rng() % 10] : 1 + static_cast<uint32_t>(rng() % 300);
    }
    const std::vector<uint8_t> want = ReferenceDeltaVarint(idx);
    for (size_t cap = want.size() > 6 ? want.size() - 6 : 0; cap <= want.size(); ++cap) {
      std::vector<uint8_t> buffer(cap + 16, kCanary);
      absl::StatusOr<size_t> n =
          EncodeIndices(IndexEncoding::kDeltaVarint, idx, absl::MakeSpan(buffer.data() + 8, cap));
      if (cap == want.size()) {
        ASSERT_TRUE(n.ok()) << n.status();
        EXPECT_EQ(std::vector<uint8_t>(buffer.begin() + 8, buffer.begin() + 8 + *n), want) << iter;
      } else {
        EXPECT_REJECTED(n.status(), absl::StatusCode::kInvalidArgument, "too small");
      }
      for (size_t b = 0; b < 8; ++b) {
        ASSERT_EQ(buffer[b], kCanary) << iter << " cap " << cap;
        ASSERT_EQ(buffer[8 + cap + b], kCanary) << iter << " cap " << cap;
      }
    }
  }
}

// Sparse selections (gaps of one and two bytes, mixed) decode four gaps
// from one load: lists of them, with longer gaps at every offset within a
// group of four, round-trip; a cut dense_length, an overlong gap and a
// three-byte gap inside such a run are named at exactly their index.
TEST(IndexEncodingTest, RunsOfShortGapsRoundTripAndNameErrors) {
  std::mt19937_64 rng(13);
  for (int iter = 0; iter < 300; ++iter) {
    const uint64_t n = iter % 3 == 0 ? (uint64_t{1} << 32) : 1000 + rng() % 2000000;
    const uint64_t start = n > 2000000 ? n - 2000000 : 0;
    const uint64_t density = 20 + rng() % 400;  // one in 20..420 kept
    // Now and then a three-byte gap.
    const std::vector<uint32_t> idx = RandomIndices(start, n, density, {40, 16384, 100000}, rng);
    ASSERT_NO_FATAL_FAILURE(DeltaVarintRoundTripAndCut(idx, n, density, rng));
  }
  // Forty varints of one and two bytes (gap 5, gap 200: 0xc8 0x01), with
  // one broken at #j: overlong (0x85 0x00) or three bytes long where
  // the gap fits two (0x85 0x80 0x00, overlong too), named at #j.
  for (int j = 1; j < 40; ++j) {
    for (const std::vector<uint8_t>& bad :
         {std::vector<uint8_t>{0x85, 0x00}, std::vector<uint8_t>{0x85, 0x80, 0x00}}) {
      std::vector<uint8_t> in;
      size_t at = 0;
      for (int v = 0; v < 40; ++v) {
        if (v == j) {
          at = in.size();
          in.insert(in.end(), bad.begin(), bad.end());
        } else if (v % 3 == 1) {
          in.insert(in.end(), {0xc8, 0x01});
        } else {
          in.push_back(5);
        }
      }
      EXPECT_REJECTED(Decode(IndexEncoding::kDeltaVarint, in, uint64_t{1} << 32, 40),
                      absl::StatusCode::kInvalidArgument,
                      absl::StrCat("varint #", j, " at byte ", at));
    }
  }
}

TEST(IndexEncodingTest, MalformedRawIndicesAreRejected) {
  const auto kRaw = IndexEncoding::kRawU32;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_REJECTED(Decode(kRaw, {1, 0, 0, 0, 1, 0, 0, 0}, 10, 2), kInvalid,
                  "index #1 = 1 does not exceed index #0 = 1");
  EXPECT_REJECTED(Decode(kRaw, {5, 0, 0, 0, 4, 0, 0, 0}, 10, 2), kInvalid, "strictly increasing");
  EXPECT_REJECTED(Decode(kRaw, {10, 0, 0, 0}, 10, 1), kInvalid,
                  "index #0 = 10 is not below dense_length 10");
  EXPECT_REJECTED(Decode(kRaw, {1, 0, 0}, 10, 1), kInvalid, "3 bytes for 1 indices");
  EXPECT_REJECTED(Decode(kRaw, {1, 0, 0, 0}, 10, 2), kInvalid, "need exactly 8");
  EXPECT_TRUE(Decode(kRaw, {9, 0, 0, 0}, 10, 1).ok());
  EXPECT_TRUE(Decode(kRaw, {0xff, 0xff, 0xff, 0xff}, uint64_t{1} << 32, 1).ok());
}

TEST(IndexEncodingTest, NoneCarriesNothing) {
  EXPECT_TRUE(Decode(IndexEncoding::kNone, {}, 10, 0).ok());
  EXPECT_REJECTED(Decode(IndexEncoding::kNone, {1}, 10, 0), absl::StatusCode::kInvalidArgument,
                  "carries no indices");
  EXPECT_REJECTED(Decode(IndexEncoding::kNone, {}, 10, 1), absl::StatusCode::kInvalidArgument,
                  "carries no indices");
  EXPECT_EQ(MaxIndexBytes(IndexEncoding::kNone, 1000), 0u);
}

TEST(IndexEncodingTest, EncoderRefusesBadInput) {
  std::vector<uint8_t> out(100);
  const uint32_t unsorted[] = {3, 3};
  EXPECT_REJECTED(EncodeIndices(IndexEncoding::kRawU32, unsorted, absl::MakeSpan(out)).status(),
                  absl::StatusCode::kInvalidArgument, "strictly increasing");
  // Delta-varint checks while it encodes: a repeat or a step back anywhere,
  // and before a full output.
  const uint32_t repeat[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10};
  EXPECT_REJECTED(EncodeIndices(IndexEncoding::kDeltaVarint, repeat, absl::MakeSpan(out)).status(),
                  absl::StatusCode::kInvalidArgument, "#9 (9) does not exceed #8 (9)");
  const uint32_t back[] = {1, 2, 1000, 5};
  EXPECT_REJECTED(
      EncodeIndices(IndexEncoding::kDeltaVarint, back, absl::MakeSpan(out.data(), 3)).status(),
      absl::StatusCode::kInvalidArgument, "#3 (5) does not exceed #2 (1000)");
  const uint32_t one[] = {3};
  EXPECT_REJECTED(EncodeIndices(IndexEncoding::kNone, one, absl::MakeSpan(out)).status(),
                  absl::StatusCode::kInvalidArgument, "index_encoding none");
  EXPECT_REJECTED(
      EncodeIndices(IndexEncoding::kRawU32, one, absl::MakeSpan(out.data(), 3)).status(),
      absl::StatusCode::kInvalidArgument, "too small");
  const uint32_t big[] = {0xffffffffu};
  EXPECT_REJECTED(
      EncodeIndices(IndexEncoding::kDeltaVarint, big, absl::MakeSpan(out.data(), 4)).status(),
      absl::StatusCode::kInvalidArgument, "too small");
  EXPECT_EQ(MaxIndexBytes(IndexEncoding::kRawU32, kU64Max / 2), kU64Max);
  EXPECT_EQ(MaxIndexBytes(IndexEncoding::kDeltaVarint, 3), 15u);
}

// CheckDeltaVarintIndices (a scan that sums the gaps and keeps nothing)
// accepts exactly the sections DecodeIndices accepts, and refuses the
// others with DecodeIndices' status, on lists of every density (one-byte
// runs, two-byte gaps, a few long ones, near 2^32) and their corruptions:
// a byte changed, cut or added, the count off by one, dense_length at or
// below the last index. DeltaVarintReader read in pieces of any size gives
// DecodeIndices' indices.
TEST(IndexEncodingTest, CheckAndPiecewiseReadsAgreeWithDecode) {
  std::mt19937_64 rng(29);
  for (int iter = 0; iter < 400; ++iter) {
    const uint64_t n = iter % 4 == 0 ? (uint64_t{1} << 32) : 500 + rng() % 200000;
    const uint64_t start = n > 200000 ? n - 200000 : 0;
    const uint64_t density = 1 + rng() % (iter % 2 == 0 ? 12 : 300);
    const std::vector<uint32_t> idx = RandomIndices(start, n, density, {60, 16384, 100000}, rng);
    const std::vector<uint8_t> bytes = Encode(IndexEncoding::kDeltaVarint, idx);
    const uint64_t last = idx.empty() ? 0 : idx.back();
    auto agree = [&](const std::vector<uint8_t>& in, uint64_t dense_length, uint64_t count) {
      const absl::Status want = Decode(IndexEncoding::kDeltaVarint, in, dense_length, count);
      const absl::Status got = CheckDeltaVarintIndices(in, count, dense_length);
      ASSERT_EQ(got, want) << "n " << dense_length << " count " << count << " iter " << iter;
    };
    ASSERT_NO_FATAL_FAILURE(agree(bytes, n, idx.size()));
    ASSERT_NO_FATAL_FAILURE(agree(bytes, last + 1, idx.size()));
    ASSERT_NO_FATAL_FAILURE(agree(bytes, last, idx.size()));
    ASSERT_NO_FATAL_FAILURE(agree(bytes, n, idx.size() + 1));
    if (!idx.empty()) ASSERT_NO_FATAL_FAILURE(agree(bytes, n, idx.size() - 1));
    for (int m = 0; m < 8 && !bytes.empty(); ++m) {
      std::vector<uint8_t> bad = bytes;
      const size_t at = rng() % bad.size();
      switch (m % 4) {
        case 0:
          bad[at] = static_cast<uint8_t>(rng());
          break;
        case 1:
          bad[at] ^= 0x80;
          break;
        case 2:
          bad.resize(at);
          break;
        default:
          bad.insert(bad.begin() + at, static_cast<uint8_t>(rng()));
      }
      ASSERT_NO_FATAL_FAILURE(agree(bad, n, idx.size()));
    }
    // Read in pieces of random sizes.
    DeltaVarintReader reader(bytes, idx.size(), n);
    std::vector<uint32_t> back;
    while (reader.remaining() > 0) {
      std::vector<uint32_t> piece(std::min<uint64_t>(reader.remaining(), 1 + rng() % 100));
      ASSERT_TRUE(reader.Read(absl::MakeSpan(piece)).ok());
      back.insert(back.end(), piece.begin(), piece.end());
    }
    ASSERT_TRUE(reader.Finish().ok());
    ASSERT_EQ(back, idx);
  }
  // Gaps that sum past 2^32 under a dense_length that does not stop them.
  std::vector<uint8_t> wide;
  for (int v = 0; v < 3; ++v) wide.insert(wide.end(), {0xff, 0xff, 0xff, 0xff, 0x0f});
  for (uint64_t dense_length : {uint64_t{1} << 33, kU64Max}) {
    const absl::Status want = Decode(IndexEncoding::kDeltaVarint, wide, dense_length, 3);
    EXPECT_FALSE(want.ok());
    EXPECT_EQ(CheckDeltaVarintIndices(wide, 3, dense_length), want);
  }
}

}  // namespace
}  // namespace gradwire
