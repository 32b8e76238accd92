#include "gradwire/lib/codec/error_feedback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/test_seed.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Codec> Make(const std::string& text) {
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return std::move(*MakeCodec(*spec));
}

// Over many steps, sum(decoded) + residual == sum(grad) up to float
// rounding: error feedback loses nothing for good.
TEST(ErrorFeedbackTest, ConservesTheGradientMassOverSteps) {
  GRADWIRE_SEEDED_RNG(rng);
  std::normal_distribution<float> normal;
  for (const char* text : {"topk:ratio=0.01", "approx_topk:ratio=0.01", "randomk:ratio=0.01",
                           "qsgd:bits=2", "sign", "fp16", "bf16"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Codec> codec = Make(text);
    ErrorFeedback ef(*codec);
    const uint64_t n = 2000;
    std::vector<double> sent(n, 0.0), total(n, 0.0);
    std::vector<uint8_t> frame(codec->MaxEncodedBytes(n));
    for (uint64_t step = 0; step < 30; ++step) {
      std::vector<float> grad(n);
      for (uint64_t i = 0; i < n; ++i) {
        grad[i] = normal(rng);
        total[i] += grad[i];
      }
      const std::vector<float> before(ef.Residual("w").begin(), ef.Residual("w").end());
      absl::StatusOr<EncodeStats> stats = ef.Encode("w", grad, step, absl::MakeSpan(frame));
      ASSERT_TRUE(stats.ok()) << stats.status();
      std::vector<float> decoded(n, 0.0f);
      ASSERT_TRUE(codec
                      ->DecodeAccumulate(absl::MakeSpan(frame.data(), stats->frame_bytes),
                                         absl::MakeSpan(decoded))
                      .ok());
      absl::Span<const float> after = ef.Residual("w");
      ASSERT_EQ(after.size(), n);
      for (uint64_t i = 0; i < n; ++i) {
        const float acc = grad[i] + (before.empty() ? 0.0f : before[i]);
        ASSERT_EQ(after[i], acc - decoded[i]) << i;  // the per-step contract
        sent[i] += decoded[i];
      }
    }
    absl::Span<const float> r = ef.Residual("w");
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(sent[i] + r[i], total[i], 1e-3 * (1 + std::fabs(total[i]))) << i;
    }
  }
}

TEST(ErrorFeedbackTest, KeysAreSeparateAndLengthsFixed) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.5");
  ErrorFeedback ef(*codec);
  std::vector<float> a(10, 1.0f), b(20, 2.0f);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(20));
  ASSERT_TRUE(ef.Encode("a", a, 0, absl::MakeSpan(frame)).ok());
  ASSERT_TRUE(ef.Encode("b", b, 0, absl::MakeSpan(frame)).ok());
  EXPECT_EQ(ef.size(), 2u);
  EXPECT_EQ(ef.Residual("a").size(), 10u);
  EXPECT_EQ(ef.Residual("b").size(), 20u);
  absl::StatusOr<EncodeStats> s = ef.Encode("a", b, 1, absl::MakeSpan(frame));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("\"a\" has 20 elements"));
  EXPECT_TRUE(ef.Residual("missing").empty());
}

TEST(ErrorFeedbackTest, OffMeansNoResidual) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.5,ef=off");
  ErrorFeedback ef(*codec);
  std::vector<float> a(10, 1.0f);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(10));
  ASSERT_TRUE(ef.Encode("a", a, 0, absl::MakeSpan(frame)).ok());
  EXPECT_EQ(ef.size(), 0u);
}

TEST(ErrorFeedbackTest, SaveRestoreRoundTripAndClearErrors) {
  GRADWIRE_SEEDED_RNG(rng);
  std::normal_distribution<float> normal;
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.1");
  ErrorFeedback ef(*codec);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(1000));
  for (const char* key : {"conv1", "fc"}) {
    std::vector<float> g(std::string(key) == "fc" ? 1000 : 300);
    for (float& x : g) x = normal(rng);
    ASSERT_TRUE(ef.Encode(key, g, 0, absl::MakeSpan(frame)).ok());
  }
  const std::string state = ef.SaveState();

  ErrorFeedback restored(*codec);
  ASSERT_TRUE(restored.RestoreState(state).ok());
  for (const char* key : {"conv1", "fc"}) {
    absl::Span<const float> x = ef.Residual(key), y = restored.Residual(key);
    ASSERT_EQ(std::vector<float>(x.begin(), x.end()), std::vector<float>(y.begin(), y.end()));
  }
  EXPECT_EQ(restored.SaveState(), state);

  // Corruption anywhere: DataLoss, nothing changed.
  std::string corrupt = state;
  corrupt[corrupt.size() / 2] ^= 0x10;
  absl::Status s = restored.RestoreState(corrupt);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(restored.SaveState(), state);
  // Truncation.
  s = restored.RestoreState(state.substr(0, state.size() - 3));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(restored.SaveState(), state);
  EXPECT_FALSE(restored.RestoreState("").ok());
  EXPECT_THAT(std::string(restored.RestoreState("hello world!").message()), HasSubstr("GWEF"));
  // Another codec's state.
  std::unique_ptr<Codec> other = Make("topk:ratio=0.2");
  ErrorFeedback ef_other(*other);
  s = ef_other.RestoreState(state);
  EXPECT_THAT(std::string(s.message()), HasSubstr("saved for codec"));
  // A key whose length differs from this model's.
  ErrorFeedback mismatched(*codec);
  std::vector<float> g(5, 1.0f);
  ASSERT_TRUE(mismatched.Encode("fc", g, 0, absl::MakeSpan(frame)).ok());
  s = mismatched.RestoreState(state);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("\"fc\" has 1000 elements but this model's has 5"));
  EXPECT_EQ(mismatched.Residual("fc").size(), 5u);
}

// The checkpoint's bytes are pinned: a state written by an earlier build
// must stay readable, so the layout is rebuilt here by hand, little endian:
//   "GWEF" | u32 1 | u32 spec_len | spec | u64 count
//   | count x (u32 key_len | key | u64 n | n x f32) | u64 XXH3-64
TEST(ErrorFeedbackTest, SavedStateHasThePinnedLayout) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.25");
  ErrorFeedback ef(*codec);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(8));
  const std::vector<float> g = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 7.0f, 0.125f, -1.0f};
  ASSERT_TRUE(ef.Encode("w", g, 0, absl::MakeSpan(frame)).ok());
  ASSERT_TRUE(ef.Encode("b", absl::MakeConstSpan(g).first(3), 0, absl::MakeSpan(frame)).ok());

  std::string want = "GWEF";
  auto put = [&want](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) want.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(1, 4);
  const std::string spec = codec->spec().ToString();
  put(spec.size(), 4);
  want += spec;
  put(2, 8);
  for (const char* key : {"b", "w"}) {  // sorted by key
    put(1, 4);
    want += key;
    absl::Span<const float> r = ef.Residual(key);
    put(r.size(), 8);
    for (float x : r) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      put(bits, 4);
    }
  }
  put(XXH3_64bits(want.data(), want.size()), 8);
  EXPECT_EQ(ef.SaveState(), want);
  ErrorFeedback restored(*codec);
  ASSERT_TRUE(restored.RestoreState(want).ok());
  EXPECT_EQ(restored.SaveState(), want);
}

// Cut anywhere, the state is refused and the residuals stay as they were.
TEST(ErrorFeedbackTest, TruncationAtEveryOffsetChangesNothing) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.5");
  ErrorFeedback ef(*codec);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(4));
  const std::vector<float> g = {1.0f, -2.0f, 3.0f, 0.5f};
  ASSERT_TRUE(ef.Encode("k", g, 0, absl::MakeSpan(frame)).ok());
  const std::string state = ef.SaveState();
  ErrorFeedback other(*codec);
  ASSERT_TRUE(other.Encode("k", {0.0f, 0.0f, 0.0f, 9.0f}, 0, absl::MakeSpan(frame)).ok());
  const std::string before = other.SaveState();
  for (size_t cut = 0; cut < state.size(); ++cut) {
    EXPECT_FALSE(other.RestoreState(state.substr(0, cut)).ok()) << cut;
    ASSERT_EQ(other.SaveState(), before) << cut;
  }
}

}  // namespace
}  // namespace gradwire
