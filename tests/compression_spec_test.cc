#include "gradwire/lib/codec/compression_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Parse(text) is InvalidArgument with `want` in its message; the message.
std::string Refusal(const char* text, const char* want) {
  absl::StatusOr<CompressionSpec> s = CompressionSpec::Parse(text);
  EXPECT_FALSE(s.ok()) << text;
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(want)) << text;
  return std::string(s.status().message());
}

TEST(CompressionSpecTest, ParsesEveryMethodAndSetting) {
  absl::StatusOr<CompressionSpec> s =
      CompressionSpec::Parse("topk:ratio=0.001,values=fp16,indices=varint,ef=off");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->method, Method::kTopK);
  EXPECT_EQ(s->ratio, 0.001);
  EXPECT_EQ(s->values, ValueType::kFp16);
  EXPECT_EQ(s->indices, IndexEncoding::kDeltaVarint);
  EXPECT_FALSE(s->UsesErrorFeedback());
  s = CompressionSpec::Parse("randomk:ratio=0.5,seed=9");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->seed, 9u);
  s = CompressionSpec::Parse("qsgd:bits=2,bucket=128");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->quant_bits, 2);
  EXPECT_EQ(s->bucket_size, 128u);
  EXPECT_TRUE(s->UsesErrorFeedback());  // default on for lossy methods
  for (const char* m : {"none", "fp16", "bf16", "topk", "approx_topk", "randomk", "qsgd", "sign"}) {
    absl::StatusOr<CompressionSpec> p = CompressionSpec::Parse(m);
    ASSERT_TRUE(p.ok()) << m;
    EXPECT_EQ(MethodName(p->method), m);
    EXPECT_EQ(p->UsesErrorFeedback(), std::string(m) != "none");
    // Canonical string round trip.
    absl::StatusOr<CompressionSpec> again = CompressionSpec::Parse(p->ToString());
    ASSERT_TRUE(again.ok()) << p->ToString();
    EXPECT_EQ(again->ToString(), p->ToString());
  }
}

TEST(CompressionSpecTest, ToStringRoundTripsOddRatios) {
  CompressionSpec spec;
  spec.method = Method::kRandomK;
  spec.ratio = 1.0 / 3.0;
  spec.seed = 18446744073709551615ull;
  spec.error_feedback = CompressionSpec::ErrorFeedback::kOn;
  absl::StatusOr<CompressionSpec> back = CompressionSpec::Parse(spec.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ratio, spec.ratio);
  EXPECT_EQ(back->seed, spec.seed);
  EXPECT_EQ(back->error_feedback, spec.error_feedback);
}

TEST(CompressionSpecTest, ErrorsNameTheFlagAndTheRange) {
  struct Bad {
    const char* text;
    const char* want;
  } cases[] = {
      {"gzip", "--compression"},
      {"gzip", "none, fp16, bf16, topk, approx_topk, randomk, qsgd, sign"},
      {"topk:ratio=1.5", "--compression_ratio must be in (0, 1], got 1.5"},
      {"topk:ratio=0", "--compression_ratio must be in (0, 1], got 0"},
      {"topk:ratio=-0.1", "--compression_ratio"},
      {"topk:ratio=nan", "--compression_ratio"},
      {"topk:ratio=abc", "--compression_ratio"},
      {"qsgd:bits=9", "--quant_bits must be in 1..8, got 9"},
      {"qsgd:bits=0", "--quant_bits must be in 1..8, got 0"},
      {"qsgd:bucket=0", "--bucket_size must be in 1..4294967295, got 0"},
      {"qsgd:bucket=-4", "--bucket_size"},
      {"topk:values=fp8", "--values"},
      {"topk:indices=zip", "--indices"},
      {"topk:ef=maybe", "--error_feedback"},
      {"randomk:seed=-1", "--seed"},
      {"topk:colour=red", "unknown setting \"colour\""},
      {"topk:ratio", "needs a value"},
      {"topk:ratio=0.1,ratio=0.2", "given twice"},
  };
  for (const Bad& c : cases) Refusal(c.text, c.want);
}

TEST(CompressionSpecTest, RefusesSettingsTheMethodDoesNotRead) {
  // No flag names: Python shows these messages as they are.
  EXPECT_THAT(Refusal("sign:ratio=0.01",
                      "setting ratio does not apply to method sign in spec "
                      "\"sign:ratio=0.01\" (sign takes: bucket, ef)"),
              Not(HasSubstr("--")));
  Refusal("topk:ratio=0.01,bits=4", "setting bits does not apply to method topk");
  Refusal("none:ef=on", "(none takes no settings)");
  Refusal("randomk:ratio=0.1,indices=raw", "indices does not apply to method randomk");
  Refusal("qsgd:bits=2,values=fp16,seed=3", "values does not apply");
  // The canonical string names every setting: it parses for every method,
  // with or without ef.
  for (const char* m : {"none", "fp16", "bf16", "topk", "approx_topk", "randomk", "qsgd", "sign"}) {
    for (const char* ef : {"", ",ef=on"}) {
      const std::string text =
          std::string(m) + ":ratio=0.5,bits=3,bucket=64,seed=5,values=fp16,indices=raw" + ef;
      absl::StatusOr<CompressionSpec> s = CompressionSpec::Parse(text);
      ASSERT_TRUE(s.ok()) << text << ": " << s.status();
      EXPECT_EQ(s->ToString(), text);
    }
  }
  // What each method reads, and only that, is accepted.
  for (const char* text : {"fp16:ef=off", "topk:ratio=0.1,ef=on,values=bf16,indices=raw",
                           "randomk:ratio=0.1,seed=2,values=fp16", "qsgd:bits=2,bucket=8,seed=1",
                           "sign:bucket=8,ef=off"}) {
    EXPECT_TRUE(CompressionSpec::Parse(text).ok()) << text;
  }
  EXPECT_EQ(SettingsOf(Method::kSign), (std::vector<std::string>{"bucket", "ef"}));
  EXPECT_TRUE(SettingsOf(Method::kNone).empty());
}

TEST(CompressionSpecTest, ValidateCatchesFieldsSetFromFlags) {
  CompressionSpec spec;
  spec.method = Method::kTopK;
  EXPECT_TRUE(spec.Validate().ok());
  spec.ratio = 2.0;
  EXPECT_THAT(std::string(spec.Validate().message()), HasSubstr("--compression_ratio"));
  spec.ratio = 0.5;
  spec.quant_bits = 12;
  EXPECT_THAT(std::string(spec.Validate().message()), HasSubstr("--quant_bits"));
  spec.quant_bits = 8;
  spec.values = ValueType::kPacked;
  EXPECT_THAT(std::string(spec.Validate().message()), HasSubstr("--values"));
}

TEST(CompressionSpecTest, SelectedCount) {
  CompressionSpec spec;
  spec.ratio = 0.01;
  EXPECT_EQ(spec.SelectedCount(0), 0u);
  EXPECT_EQ(spec.SelectedCount(1), 1u);  // at least one
  EXPECT_EQ(spec.SelectedCount(1000), 10u);
  EXPECT_EQ(spec.SelectedCount(25557032), 255570u);
  spec.ratio = 1.0;
  EXPECT_EQ(spec.SelectedCount(77), 77u);
}

// QSGD senders must round independently (else the noise of P ranks does
// not average); random-k senders must share the seed (indices are implied).
TEST(CompressionSpecTest, ForSenderGivesQsgdOneSeedPerRankAndKeepsTheRest) {
  absl::StatusOr<CompressionSpec> parsed = CompressionSpec::Parse("qsgd:bits=4,seed=7");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const CompressionSpec qsgd = *parsed;
  std::set<uint64_t> seeds;
  for (int rank = 0; rank < 64; ++rank) {
    CompressionSpec sender = qsgd.ForSender(rank);
    seeds.insert(sender.seed);
    sender.seed = qsgd.seed;
    EXPECT_EQ(sender.ToString(), qsgd.ToString()) << "rank " << rank;
  }
  EXPECT_EQ(seeds.size(), 64u);
  EXPECT_EQ(seeds.count(qsgd.seed), 0u);
  for (const char* text : {"randomk:ratio=0.01,seed=7",
                           "topk:ratio=0.01,bits=4,bucket=512,seed=7,values=fp32,indices=varint",
                           "sign:ratio=0.01,bits=4,bucket=512,seed=7,values=fp32,indices=varint"}) {
    absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->ForSender(3).ToString(), spec->ToString()) << text;
  }
}

}  // namespace
}  // namespace gradwire
