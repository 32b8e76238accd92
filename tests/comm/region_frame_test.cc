// Single-process tests of the sparse allreduce's parts: region frames
// (layout choice, every validation), ErrorFeedback::GiveBack, and the
// local top-k that the global selection is compared with.
#include "gradwire/lib/comm/region_frame.h"

#include <cstring>
#include <vector>

#include "gradwire/base/coding.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/comm/global_selection.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

RegionFrameHeader Contribution(uint64_t begin, uint64_t length, ValueType type) {
  RegionFrameHeader h;
  h.kind = RegionFrameKind::kContribution;
  h.value_type = type;
  h.region = 2;
  h.begin = begin;
  h.length = length;
  return h;
}

RegionExpectation ExpectFor(const RegionFrameHeader& h, RegionLayout sparse, uint64_t max_count) {
  RegionExpectation want;
  want.kind = h.kind;
  want.value_type = h.value_type;
  want.sparse = sparse;
  want.region = h.region;
  want.begin = h.begin;
  want.length = h.length;
  want.max_count = max_count;
  return want;
}

std::vector<uint8_t> Fp32(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(4 * values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    kernels::StoreValue(bytes.data(), i, values[i], kernels::ValueFormat::kFp32);
  }
  return bytes;
}

TEST(RegionFrame, SparseRoundTrip) {
  const RegionFrameHeader h = Contribution(1000, 500, ValueType::kFp32);
  const std::vector<uint32_t> indices = {0, 3, 4, 499};
  const std::vector<uint8_t> values = Fp32({1.5f, -2.0f, 0.25f, 8.0f});
  std::vector<uint8_t> out(
      MaxRegionFrameBytes(RegionLayout::kDeltaVarint, ValueType::kFp32, 500, 4));
  auto n = WriteRegionFrame(h, RegionLayout::kDeltaVarint, {indices.data(), values.data(), 4},
                            absl::MakeSpan(out));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(out[7], static_cast<uint8_t>(RegionLayout::kDeltaVarint));
  std::vector<uint32_t> got;
  auto view = ParseRegionFrame(absl::MakeConstSpan(out.data(), *n),
                               ExpectFor(h, RegionLayout::kDeltaVarint, 4), &got);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(got, indices);
  EXPECT_EQ(view->header.count, 4u);
  EXPECT_EQ(std::vector<uint8_t>(view->values.begin(), view->values.end()), values);
}

// SparCML's rule: dense as soon as it is smaller than indices + values.
TEST(RegionFrame, SwitchesToDenseWhenSmaller) {
  const RegionFrameHeader h = Contribution(0, 6, ValueType::kFp16);
  const std::vector<uint32_t> indices = {0, 1, 2, 4, 5};
  std::vector<uint8_t> values(10);
  for (int j = 0; j < 5; ++j)
    kernels::StoreValue(values.data(), j, j + 1.0f, kernels::ValueFormat::kFp16);
  std::vector<uint8_t> out(MaxRegionFrameBytes(RegionLayout::kRawU32, ValueType::kFp16, 6, 5));
  EXPECT_EQ(out.size(), kRegionHeaderBytes + 12);  // the dense size bounds it
  auto n = WriteRegionFrame(h, RegionLayout::kRawU32, {indices.data(), values.data(), 5},
                            absl::MakeSpan(out));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, kRegionHeaderBytes + 12);
  EXPECT_EQ(out[7], static_cast<uint8_t>(RegionLayout::kDense));
  std::vector<uint32_t> got;
  auto view = ParseRegionFrame(absl::MakeConstSpan(out.data(), *n),
                               ExpectFor(h, RegionLayout::kRawU32, 5), &got);
  ASSERT_TRUE(view.ok()) << view.status();
  const float want[6] = {1, 2, 3, 0, 4, 5};  // the hole is a zero
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(kernels::LoadValue(view->values.data(), i, kernels::ValueFormat::kFp16), want[i]);
  }
  // One entry: sparse again.
  n = WriteRegionFrame(h, RegionLayout::kRawU32, {indices.data(), values.data(), 1},
                       absl::MakeSpan(out));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(out[7], static_cast<uint8_t>(RegionLayout::kRawU32));
}

// Every field a receiver checks, each broken once.
TEST(RegionFrame, RefusesEveryMalformedField) {
  const RegionFrameHeader h = Contribution(64, 100, ValueType::kFp32);
  const std::vector<uint32_t> indices = {5, 9};
  const std::vector<uint8_t> values = Fp32({1.0f, 2.0f});
  std::vector<uint8_t> good(200);
  auto n = WriteRegionFrame(h, RegionLayout::kRawU32, {indices.data(), values.data(), 2},
                            absl::MakeSpan(good));
  ASSERT_TRUE(n.ok());
  good.resize(*n);
  const RegionExpectation want = ExpectFor(h, RegionLayout::kRawU32, 10);
  std::vector<uint32_t> got;
  ASSERT_TRUE(ParseRegionFrame(good, want, &got).ok());
  struct Case {
    const char* what;
    size_t offset;
    uint8_t value;
  };
  const Case cases[] = {
      {"magic", 0, 'X'},      {"version", 4, 9},        {"kind", 5, 2},
      {"value type", 6, 1},   {"layout", 7, 2},         {"region", 8, 3},
      {"status", 12, 1},      {"region begin", 16, 65}, {"region length", 20, 99},
      {"count", 24, 3},       {"reserved", 28, 1},      {"index bytes", 32, 12},
      {"index order", 40, 9}, {"index range", 44, 100},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bad = good;
    bad[c.offset] = c.value;
    EXPECT_FALSE(ParseRegionFrame(bad, want, &got).ok()) << c.what;
  }
  // Truncated anywhere, or one byte too long.
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(ParseRegionFrame(absl::MakeConstSpan(good.data(), len), want, &got).ok()) << len;
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_FALSE(ParseRegionFrame(longer, want, &got).ok());
  // More entries than the receiver allows.
  RegionExpectation tight = want;
  tight.max_count = 1;
  EXPECT_FALSE(ParseRegionFrame(good, tight, &got).ok());
}

// A region past 2^32 - 1 is refused even where the receiver expects it:
// the parser accepts nothing WriteRegionFrame cannot write (found by
// tests/fuzz/input_fuzzer.cc).
TEST(RegionFrame, RefusesRegionsPastTheU32Range) {
  const RegionFrameHeader h = Contribution(0xf0000000u, 0x10000000u, ValueType::kFp32);
  std::vector<uint8_t> frame(kRegionHeaderBytes);
  auto n = WriteRegionFrame(h, RegionLayout::kRawU32, {nullptr, nullptr, 0}, absl::MakeSpan(frame));
  ASSERT_FALSE(n.ok());
  // The same header by hand: a region ending at 2^32, no entries.
  auto last = WriteRegionFrame(Contribution(0xf0000000u, 0x0fffffffu, ValueType::kFp32),
                               RegionLayout::kRawU32, {nullptr, nullptr, 0}, absl::MakeSpan(frame));
  ASSERT_TRUE(last.ok()) << last.status();  // ends at 2^32 - 1: fits
  std::vector<uint32_t> got;
  ASSERT_TRUE(ParseRegionFrame(frame,
                               ExpectFor(Contribution(0xf0000000u, 0x0fffffffu, ValueType::kFp32),
                                         RegionLayout::kRawU32, 0),
                               &got)
                  .ok());
  EncodeFixed32(frame.data() + 20, 0x10000000u);
  auto view = ParseRegionFrame(frame, ExpectFor(h, RegionLayout::kRawU32, 0), &got);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("does not fit"), std::string::npos) << view.status();
}

TEST(RegionFrame, FailureNotice) {
  std::vector<uint8_t> out(kRegionHeaderBytes);
  auto n = WriteRegionFailure(2, 64, 100, 16, absl::MakeSpan(out));
  ASSERT_TRUE(n.ok());
  RegionFrameHeader h = Contribution(64, 100, ValueType::kFp32);
  h.kind = RegionFrameKind::kSurvivors;
  RegionExpectation want = ExpectFor(h, RegionLayout::kRawU32, 10);
  std::vector<uint32_t> got;
  EXPECT_FALSE(ParseRegionFrame(out, want, &got).ok());  // not allowed here
  want.failure_allowed = true;
  auto view = ParseRegionFrame(out, want, &got);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->header.kind, RegionFrameKind::kFailure);
  EXPECT_EQ(view->header.status, 16u);
  out[12] = 0;  // a notice without a status code
  EXPECT_FALSE(ParseRegionFrame(out, want, &got).ok());
}

TEST(GiveBack, RestoresWhatEncodeTookOut) {
  auto spec = CompressionSpec::Parse("topk:ratio=0.5,values=bf16");
  auto codec = MakeCodec(*spec);
  ErrorFeedback ef(**codec);
  const std::vector<float> g = {3.14159f, -0.001f, 2.71828f, 0.5f};
  std::vector<uint8_t> frame((*codec)->MaxEncodedBytes(4));
  auto encoded = ef.Encode("b", g, 0, absl::MakeSpan(frame));
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  std::vector<float> decoded(4, 0.0f);
  ASSERT_TRUE((*codec)
                  ->DecodeAccumulate(absl::MakeConstSpan(frame.data(), encoded->frame_bytes),
                                     absl::MakeSpan(decoded))
                  .ok());
  ASSERT_NE(decoded[0], 0.0f);  // the two largest were selected
  ASSERT_NE(decoded[2], 0.0f);
  const std::vector<uint32_t> idx = {0, 2};
  const std::vector<float> val = {decoded[0], decoded[2]};
  ASSERT_TRUE(ef.GiveBack("b", idx, val).ok());
  const absl::Span<const float> e = ef.Residual("b");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e[i], g[i]) << i;  // as if nothing was sent
  EXPECT_FALSE(ef.GiveBack("none", idx, val).ok());
  EXPECT_FALSE(ef.GiveBack("b", {4}, {1.0f}).ok());
  EXPECT_FALSE(ef.GiveBack("b", idx, {1.0f}).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e[i], g[i]) << i;  // refusals change nothing
  // A non-finite result resets to 0, the codec's rule.
  ASSERT_TRUE(ef.GiveBack("b", {0}, {kernels::BitsFloat(0x7f800000u)}).ok());
  EXPECT_EQ(ef.Residual("b")[0], 0.0f);
}

TEST(Selection, LocalTopKOrder) {
  // |value| decides, NaN lowest, Inf highest, ties to the lower index.
  const float nan = kernels::BitsFloat(0x7fc00000u), inf = kernels::BitsFloat(0x7f800000u);
  std::vector<uint64_t> keys = {SelectionKey(1.0f, 0), SelectionKey(-2.0f, 1),
                                SelectionKey(2.0f, 2), SelectionKey(nan, 3),
                                SelectionKey(-inf, 4), SelectionKey(0.0f, 5)};
  auto survivors = [&](uint64_t k) {
    const GlobalSelection s = SelectTopKLocally(keys, k);
    std::vector<int> chosen;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] >= s.threshold) chosen.push_back(i);
    }
    return chosen;
  };
  EXPECT_EQ(survivors(1), std::vector<int>({4}));
  EXPECT_EQ(survivors(2), std::vector<int>({1, 4}));
  EXPECT_EQ(survivors(3), std::vector<int>({1, 2, 4}));
  EXPECT_EQ(survivors(5), std::vector<int>({0, 1, 2, 4, 5}));
  EXPECT_EQ(survivors(9).size(), 6u);
  EXPECT_EQ(survivors(0).size(), 0u);
}

}  // namespace
}  // namespace gradwire
