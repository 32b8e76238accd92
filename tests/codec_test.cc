// Every codec x value type x index encoding: round trip, the
// error-feedback contract bit for bit, and refusal of frames that do not
// match the receiver's spec (with `dense` untouched).
#include "gradwire/lib/codec/codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/sparse_codec.h"
#include "tests/test_seed.h"

namespace gradwire {
namespace {

using kernels::FloatBits;
using ::testing::HasSubstr;

// Forces one of the sparse codecs' two ways of averaging delta-varint
// frames on the host for a scope: decoded as added, or over whole lists.
class ForcedHostAverageWay {
 public:
  explicit ForcedHostAverageWay(bool by_ranges)
      : before_(codec_internal::SetHostAverageWayForTesting(
            by_ranges ? codec_internal::HostAverageWay::kAsDecoded
                      : codec_internal::HostAverageWay::kWholeLists)) {}
  ~ForcedHostAverageWay() { codec_internal::SetHostAverageWayForTesting(before_); }

 private:
  const codec_internal::HostAverageWay before_;
};

std::vector<std::string> AllSpecs() {
  // "none" takes no settings: ef=on only in the canonical string.
  std::vector<std::string> specs = {
      "none", "none:ratio=0.01,bits=4,bucket=512,seed=0,values=fp32,indices=varint,ef=on", "fp16",
      "bf16", "fp16:ef=off"};
  for (const char* m : {"topk", "approx_topk"}) {
    for (const char* v : {"fp32", "fp16", "bf16"}) {
      for (const char* i : {"raw", "varint"}) {
        specs.push_back(std::string(m) + ":ratio=0.05,values=" + v + ",indices=" + i);
      }
    }
  }
  for (const char* v : {"fp32", "fp16", "bf16"}) {
    specs.push_back(std::string("randomk:ratio=0.05,seed=11,values=") + v);
  }
  specs.push_back("topk:ratio=1");
  specs.push_back("topk:ratio=0.05,ef=off");
  for (int bits = 1; bits <= 8; ++bits) {
    specs.push_back("qsgd:bits=" + std::to_string(bits) + ",bucket=100");
  }
  specs.push_back("qsgd:bits=3,bucket=1");
  specs.push_back("sign:bucket=64");
  specs.push_back("sign:bucket=7");  // buckets that split bytes
  specs.push_back("sign:bucket=1000000");
  return specs;
}

std::unique_ptr<Codec> Make(const std::string& text) {
  absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(*spec);
  EXPECT_TRUE(codec.ok()) << codec.status();
  return std::move(*codec);
}

std::vector<float> Gradient(uint64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng) * std::exp(normal(rng));  // heavy-ish tail
  return g;
}

// One frame per sender of a fresh gradient of n elements, sender r's at
// steps[r] (no residual). Empty, with a test failure, if an encode fails.
std::vector<std::vector<uint8_t>> SendersFrames(const Codec& codec, uint64_t n,
                                                const std::vector<uint64_t>& steps,
                                                std::mt19937_64& rng) {
  std::vector<std::vector<uint8_t>> frames(steps.size());
  for (size_t r = 0; r < steps.size(); ++r) {
    const std::vector<float> grad = Gradient(n, rng);
    frames[r].resize(codec.MaxEncodedBytes(n));
    absl::StatusOr<EncodeStats> st = codec.Encode(grad, steps[r], {}, absl::MakeSpan(frames[r]));
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return {};
    frames[r].resize(st->frame_bytes);
  }
  return frames;
}

bool IsSelectionOrCast(Method m) { return m != Method::kQsgd && m != Method::kSign; }

TEST(CodecTest, RoundTripAndErrorFeedbackContractForEveryCodec) {
  GRADWIRE_SEEDED_RNG(rng);
  for (const std::string& text : AllSpecs()) {
    for (uint64_t n : {0ull, 1ull, 333ull, 10007ull}) {
      SCOPED_TRACE(text + " n=" + std::to_string(n));
      std::unique_ptr<Codec> codec = Make(text);
      const bool ef = codec->spec().UsesErrorFeedback();
      std::vector<float> residual = ef ? Gradient(n, rng) : std::vector<float>();
      for (float& r : residual) r *= 0.1f;
      for (uint64_t step = 0; step < 3; ++step) {
        const std::vector<float> grad = Gradient(n, rng);
        std::vector<float> acc(n);
        for (uint64_t i = 0; i < n; ++i) acc[i] = ef ? grad[i] + residual[i] : grad[i];
        std::vector<uint8_t> frame(codec->MaxEncodedBytes(n));
        absl::StatusOr<EncodeStats> stats =
            codec->Encode(grad, step, absl::MakeSpan(residual), absl::MakeSpan(frame));
        ASSERT_TRUE(stats.ok()) << stats.status();
        ASSERT_LE(stats->frame_bytes, frame.size());
        frame.resize(stats->frame_bytes);
        // Decode into zeros: exactly decode(frame).
        std::vector<float> decoded(n, 0.0f);
        ASSERT_TRUE(codec->DecodeAccumulate(frame, absl::MakeSpan(decoded)).ok());
        const Method m = codec->spec().method;
        uint64_t nonzero = 0;
        for (uint64_t i = 0; i < n; ++i) {
          nonzero += decoded[i] != 0.0f;
          if (ef) {
            // e_new == fl(acc - decoded), bit for bit.
            ASSERT_EQ(FloatBits(residual[i]), FloatBits(acc[i] - decoded[i])) << i;
            if (IsSelectionOrCast(m)) {
              ASSERT_EQ(FloatBits(decoded[i] + residual[i]), FloatBits(acc[i] + 0.0f)) << i;
            }
          }
          if (m == Method::kNone) {
            ASSERT_EQ(decoded[i], acc[i]);
          }
        }
        if (m == Method::kTopK || m == Method::kApproxTopK || m == Method::kRandomK) {
          EXPECT_EQ(stats->selected, codec->spec().SelectedCount(n));
          EXPECT_LE(nonzero, stats->selected);
        }
        // Accumulating adds to what is there.
        std::vector<float> twice = decoded;
        ASSERT_TRUE(codec->DecodeAccumulate(frame, absl::MakeSpan(twice)).ok());
        for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(twice[i], decoded[i] + decoded[i]);
      }
    }
  }
}

TEST(CodecTest, TopKFrameIsMuchSmallerThanDense) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.01,indices=varint,values=fp16");
  std::vector<float> grad(100000, 1.0f);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(grad.size()));
  absl::StatusOr<EncodeStats> stats = codec->Encode(grad, 0, {}, absl::MakeSpan(frame));
  ASSERT_TRUE(stats.ok());
  // 1000 values: 2 bytes each + 1-byte varints (ties pick indices 0..999).
  EXPECT_LT(stats->frame_bytes, 3200u);
}

TEST(CodecTest, EncodeRefusesBadArgumentsWithoutTouchingTheResidual) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.1");
  std::vector<float> grad(100, 1.0f), residual(100, 0.5f), short_residual(99, 0.5f);
  std::vector<uint8_t> small(codec->MaxEncodedBytes(100) - 1);
  absl::StatusOr<EncodeStats> s =
      codec->Encode(grad, 0, absl::MakeSpan(residual), absl::MakeSpan(small));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("MaxEncodedBytes"));
  EXPECT_EQ(residual, std::vector<float>(100, 0.5f));
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(100));
  s = codec->Encode(grad, 0, absl::MakeSpan(short_residual), absl::MakeSpan(frame));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("residual has 99"));
}

// Encodes one frame with `sender`, decodes with `receiver`, expects refusal
// naming `want`, and checks the dense buffer was not touched.
void ExpectRefused(const std::string& sender, const std::string& receiver, uint64_t n,
                   uint64_t receiver_n, const std::string& want) {
  SCOPED_TRACE(sender + " -> " + receiver);
  std::unique_ptr<Codec> enc = Make(sender), dec = Make(receiver);
  std::vector<float> grad(n);
  for (uint64_t i = 0; i < n; ++i) grad[i] = std::sin(static_cast<float>(i));
  std::vector<uint8_t> frame(enc->MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> stats = enc->Encode(grad, 5, {}, absl::MakeSpan(frame));
  ASSERT_TRUE(stats.ok());
  frame.resize(stats->frame_bytes);
  std::vector<float> dense(receiver_n, 7.0f);
  absl::Status s = dec->DecodeAccumulate(frame, absl::MakeSpan(dense));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(want));
  EXPECT_EQ(dense, std::vector<float>(receiver_n, 7.0f));
}

TEST(CodecTest, DecodeRefusesFramesForAnotherSpec) {
  ExpectRefused("topk:ratio=0.1", "approx_topk:ratio=0.1", 1000, 1000, "codec id");
  ExpectRefused("topk:ratio=0.1", "topk:ratio=0.2", 1000, 1000, "element_count");
  ExpectRefused("topk:ratio=0.1", "topk:ratio=0.1,values=fp16", 1000, 1000, "value_type");
  ExpectRefused("topk:ratio=0.1,indices=raw", "topk:ratio=0.1,indices=varint", 1000, 1000,
                "index_encoding");
  ExpectRefused("topk:ratio=0.1", "topk:ratio=0.1,indices=raw", 1000, 1000, "index_encoding");
  ExpectRefused("topk:ratio=0.1", "topk:ratio=0.1", 1000, 999, "dense_length");
  ExpectRefused("randomk:ratio=0.1,seed=1", "randomk:ratio=0.1,seed=2", 1000, 1000, "seed");
  ExpectRefused("qsgd:bits=4", "qsgd:bits=3", 1000, 1000, "quant_bits");
  ExpectRefused("qsgd:bits=4,bucket=100", "qsgd:bits=4,bucket=50", 1000, 1000, "bucket_size");
  ExpectRefused("fp16", "bf16", 1000, 1000, "codec id");
  ExpectRefused("sign", "qsgd:bits=1", 1000, 1000, "codec id");
}

// Re-seals a frame after patching it, so codec checks (not the checksum)
// are what refuses it.
// DecodeAverage is the reference's arithmetic (decode each frame into
// zeros in order, then divide every element) bit for bit, for P frames
// from P different senders (distinct gradients, and for random-k one step
// or mixed steps), and checks every frame before it writes anything.
TEST(CodecTest, DecodeAverageEqualsDecodeIntoZerosThenDivide) {
  GRADWIRE_SEEDED_RNG(rng);
  for (const std::string& text : AllSpecs()) {
    for (uint64_t n : {0ull, 1ull, 333ull, 10007ull}) {
      for (size_t p : {1u, 2u, 3u, 5u}) {
        SCOPED_TRACE(text + " n=" + std::to_string(n) + " P=" + std::to_string(p));
        std::unique_ptr<Codec> codec = Make(text);
        // Random-k: with P = 5, rank 2 on another step gives other
        // indices; fewer frames share one step (the fused average).
        std::vector<uint64_t> steps(p, 7);
        if (p == 5) steps[2] = 8;
        const std::vector<std::vector<uint8_t>> frames = SendersFrames(*codec, n, steps, rng);
        ASSERT_EQ(frames.size(), p);
        const std::vector<absl::Span<const uint8_t>> views(frames.begin(), frames.end());
        for (float divisor : {1.0f, static_cast<float>(p), 3.0f, 0.7f}) {
          std::vector<float> want(n, 0.0f);
          for (size_t r = 0; r < p; ++r) {
            ASSERT_TRUE(codec->DecodeAccumulate(frames[r], absl::MakeSpan(want)).ok());
          }
          for (float& x : want) x /= divisor;
          std::vector<float> got(n, 42.0f);  // stale contents must not leak through
          CodecScratch scratch;
          size_t bad = 99;
          ASSERT_TRUE(
              codec->DecodeAverage(views, divisor, absl::MakeSpan(got), &scratch, &bad).ok());
          for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << i;
          // Reusing the scratch (stale bitmap and indices) changes nothing.
          std::fill(got.begin(), got.end(), -1.0f);
          ASSERT_TRUE(codec->DecodeAverage(views, divisor, absl::MakeSpan(got), &scratch).ok());
          for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << i;
        }
        // A damaged last frame: refused, named, nothing written.
        std::vector<uint8_t> broken = frames[p - 1];
        broken[broken.size() / 2] ^= 0x10;
        std::vector<absl::Span<const uint8_t>> with_bad = views;
        with_bad[p - 1] = broken;
        std::vector<float> untouched(n, 7.0f);
        size_t bad = 99;
        absl::Status s =
            codec->DecodeAverage(with_bad, 2.0f, absl::MakeSpan(untouched), nullptr, &bad);
        EXPECT_FALSE(s.ok());
        EXPECT_EQ(bad, p - 1);
        EXPECT_EQ(untouched, std::vector<float>(n, 7.0f));
      }
    }
  }
}

TEST(CodecTest, DecodeAverageRefusesBadDivisorsAndForeignLengths) {
  std::unique_ptr<Codec> codec = Make("topk:ratio=0.05");
  std::vector<float> grad(100, 1.0f);
  std::vector<uint8_t> frame(codec->MaxEncodedBytes(100));
  absl::StatusOr<EncodeStats> st = codec->Encode(grad, 0, {}, absl::MakeSpan(frame));
  ASSERT_TRUE(st.ok());
  frame.resize(st->frame_bytes);
  std::vector<absl::Span<const uint8_t>> views = {frame, frame};
  std::vector<float> out(100, 7.0f);
  for (float d : {0.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    size_t bad = 99;
    absl::Status s = codec->DecodeAverage(views, d, absl::MakeSpan(out), nullptr, &bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << d;
    EXPECT_THAT(std::string(s.message()), HasSubstr("divisor must be positive and finite"));
    EXPECT_EQ(bad, views.size());
  }
  // A frame for 100 elements into 99: the first frame is named.
  std::vector<float> short_out(99, 7.0f);
  size_t bad = 99;
  absl::Status s = codec->DecodeAverage(views, 2.0f, absl::MakeSpan(short_out), nullptr, &bad);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(out, std::vector<float>(100, 7.0f));
  EXPECT_EQ(short_out, std::vector<float>(99, 7.0f));
}

// Quantized frames carry finite scales, yet P of them near the top of the
// fp32 range would sum to +inf. DecodeAverage refuses exactly the frame
// sets whose average could overflow (naming the frame that tips the
// bucket's scales over) and averages every other set as before.
TEST(CodecTest, QuantizedAverageNeverOverflows) {
  constexpr float kMax = std::numeric_limits<float>::max();
  for (const char* text : {"qsgd:bits=4,bucket=8", "sign:bucket=8"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Codec> codec = Make(text);
    const uint64_t n = 16;
    // Bucket 0 entirely at +FLT_MAX: scale FLT_MAX, every code decodes to
    // +FLT_MAX. Bucket 1 small.
    auto frame_for = [&](float top) {
      std::vector<float> g(n, 0.5f);
      std::fill(g.begin(), g.begin() + 8, top);
      std::vector<uint8_t> f(codec->MaxEncodedBytes(n));
      absl::StatusOr<EncodeStats> st = codec->Encode(g, 3, {}, absl::MakeSpan(f));
      EXPECT_TRUE(st.ok()) << st.status();
      f.resize(st->frame_bytes);
      return f;
    };
    const std::vector<uint8_t> huge = frame_for(kMax), small = frame_for(1.0f),
                               quarter = frame_for(kMax / 4);
    std::vector<float> out(n, 7.0f);
    size_t bad = 99;

    // Two at FLT_MAX: the reference would give +inf. Refused, named,
    // nothing written.
    std::vector<absl::Span<const uint8_t>> views = {small, huge, huge};
    absl::Status s = codec->DecodeAverage(views, 3.0f, absl::MakeSpan(out), nullptr, &bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("frame 2: the scales of bucket 0"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("overflow"));
    EXPECT_EQ(bad, 2u);
    EXPECT_EQ(out, std::vector<float>(n, 7.0f));

    // What cannot overflow is averaged, bit for bit as the reference:
    // one frame at FLT_MAX (alone, or with one whose scale rounds away),
    // four at a quarter of it.
    const std::vector<std::vector<absl::Span<const uint8_t>>> fine = {
        {huge}, {small, huge}, {quarter, quarter, quarter, quarter}};
    for (const auto& set : fine) {
      for (float divisor : {1.0f, static_cast<float>(set.size())}) {
        std::vector<float> want(n, 0.0f);
        for (absl::Span<const uint8_t> f : set) {
          ASSERT_TRUE(codec->DecodeAccumulate(f, absl::MakeSpan(want)).ok());
        }
        for (float& x : want) x /= divisor;
        std::vector<float> got(n, 7.0f);
        s = codec->DecodeAverage(set, divisor, absl::MakeSpan(got), nullptr, &bad);
        ASSERT_TRUE(s.ok()) << s << " P=" << set.size() << " divisor " << divisor;
        for (uint64_t i = 0; i < n; ++i) {
          ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << i;
          ASSERT_TRUE(std::isfinite(got[i])) << i;
        }
      }
    }
    // A divisor below 1 scales up: FLT_MAX / 0.5 overflows.
    s = codec->DecodeAverage({huge}, 0.5f, absl::MakeSpan(out), nullptr, &bad);
    EXPECT_THAT(std::string(s.message()), HasSubstr("frame 0: the scales of bucket 0"));
    EXPECT_EQ(out, std::vector<float>(n, 7.0f));
  }
}

std::vector<uint8_t> Patched(std::vector<uint8_t> frame, size_t at, uint8_t value) {
  frame[at] = value;
  absl::StatusOr<size_t> sealed = SealFrame(absl::MakeSpan(frame));
  EXPECT_TRUE(sealed.ok()) << sealed.status();
  return frame;
}

TEST(CodecTest, DecodeRefusesBadPayloadsBeforeTouchingDense) {
  const uint64_t n = 1000;
  std::vector<float> grad(n);
  for (uint64_t i = 0; i < n; ++i) grad[i] = std::cos(static_cast<float>(i) * 0.37f);
  // QSGD: a NaN or negative scale, and stray bits after the last code.
  std::unique_ptr<Codec> q = Make("qsgd:bits=3,bucket=128");
  std::vector<uint8_t> frame(q->MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> stats = q->Encode(grad, 1, {}, absl::MakeSpan(frame));
  ASSERT_TRUE(stats.ok());
  frame.resize(stats->frame_bytes);
  std::vector<float> dense(n, 7.0f);
  const size_t scale0 = kFrameHeaderBytes;
  for (uint8_t top : {uint8_t{0x7f}, uint8_t{0xff}, uint8_t{0x80}}) {
    std::vector<uint8_t> bad = Patched(frame, scale0 + 3, top);
    bad = Patched(bad, scale0 + 2, 0xc0);
    absl::Status s = q->DecodeAccumulate(bad, absl::MakeSpan(dense));
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("scale of bucket 0"));
  }
  std::unique_ptr<Codec> s3 = Make("qsgd:bits=3,bucket=128");
  std::vector<float> g999(999, 1.0f);
  std::vector<uint8_t> f2(s3->MaxEncodedBytes(999));
  stats = s3->Encode(g999, 1, {}, absl::MakeSpan(f2));  // 2997 bits: 3 spare bits
  ASSERT_TRUE(stats.ok());
  f2.resize(stats->frame_bytes);
  const size_t last = f2.size() - kFrameChecksumBytes - 1;
  std::vector<uint8_t> bad = Patched(f2, last, f2[last] | 0x80);
  std::vector<float> d999(999, 7.0f);
  absl::Status s = s3->DecodeAccumulate(bad, absl::MakeSpan(d999));
  EXPECT_THAT(std::string(s.message()), HasSubstr("unused bits"));
  EXPECT_EQ(d999, std::vector<float>(999, 7.0f));
  EXPECT_EQ(dense, std::vector<float>(n, 7.0f));

  // Top-k: indices out of order (swap two raw u32 indices).
  std::unique_ptr<Codec> t = Make("topk:ratio=0.01");
  std::vector<uint8_t> tf(t->MaxEncodedBytes(n));
  stats = t->Encode(grad, 1, {}, absl::MakeSpan(tf));
  ASSERT_TRUE(stats.ok());
  tf.resize(stats->frame_bytes);
  std::vector<uint8_t> swapped = tf;
  for (int b = 0; b < 4; ++b)
    std::swap(swapped[kFrameHeaderBytes + b], swapped[kFrameHeaderBytes + 4 + b]);
  ASSERT_TRUE(SealFrame(absl::MakeSpan(swapped)).ok());
  s = t->DecodeAccumulate(swapped, absl::MakeSpan(dense));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(dense, std::vector<float>(n, 7.0f));
  // A flipped payload bit without re-sealing: checksum.
  std::vector<uint8_t> flipped = tf;
  flipped[kFrameHeaderBytes + 2] ^= 1;
  s = t->DecodeAccumulate(flipped, absl::MakeSpan(dense));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(dense, std::vector<float>(n, 7.0f));
}

// Sparse frames long enough to span many of SparseAverage's chunks give
// the reference's bits, and a frame whose index section is bad under a
// valid checksum (the first, a middle or the last) is refused and named
// with DecodeAccumulate's error before anything is written.
TEST(CodecTest, DecodeAverageOfLongSparseFramesChecksEveryFrameFirst) {
  // Both of the host's ways: whole index lists and decoded as added.
  for (bool by_ranges : {false, true}) {
    SCOPED_TRACE(by_ranges ? "decoded as added" : "whole lists");
    const ForcedHostAverageWay way(by_ranges);
    GRADWIRE_SEEDED_RNG(rng);
    const uint64_t n = 300007;  // k = 30001 at 10 %: entries in ~73 chunks of 4096
    const size_t p = 4;
    for (const char* text : {"topk:ratio=0.1", "approx_topk:ratio=0.1",
                             "topk:ratio=0.01,indices=raw", "topk:ratio=0.1,values=bf16"}) {
      SCOPED_TRACE(text);
      std::unique_ptr<Codec> codec = Make(text);
      const std::vector<std::vector<uint8_t>> frames =
          SendersFrames(*codec, n, std::vector<uint64_t>(p, 3), rng);
      ASSERT_EQ(frames.size(), p);
      const std::vector<absl::Span<const uint8_t>> views(frames.begin(), frames.end());
      std::vector<float> want(n, 0.0f);
      for (size_t r = 0; r < p; ++r) {
        ASSERT_TRUE(codec->DecodeAccumulate(frames[r], absl::MakeSpan(want)).ok());
      }
      for (float& x : want) x /= 4.0f;
      std::vector<float> got(n, 42.0f);
      CodecScratch scratch;
      ASSERT_TRUE(codec->DecodeAverage(views, 4.0f, absl::MakeSpan(got), &scratch).ok());
      for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << i;
      for (size_t bad_at : {size_t{0}, size_t{2}, p - 1}) {
        // The index section's last byte: a continuation bit with nothing
        // after it (delta-varint), or the last raw index's top byte (>= n).
        absl::StatusOr<ParsedFrame> parsed = ParseFrame(frames[bad_at], FrameLimits());
        ASSERT_TRUE(parsed.ok());
        const size_t last =
            static_cast<size_t>(parsed->sections.indices.data() - frames[bad_at].data()) +
            parsed->sections.indices.size() - 1;
        const std::vector<uint8_t> broken = Patched(frames[bad_at], last, 0x80);
        std::vector<absl::Span<const uint8_t>> with_bad = views;
        with_bad[bad_at] = broken;
        std::vector<float> untouched(n, 7.0f);
        size_t bad = 99;
        absl::Status s =
            codec->DecodeAverage(with_bad, 4.0f, absl::MakeSpan(untouched), &scratch, &bad);
        std::vector<float> scratch_dense(n, 0.0f);
        const absl::Status alone = codec->DecodeAccumulate(broken, absl::MakeSpan(scratch_dense));
        EXPECT_FALSE(alone.ok());
        EXPECT_EQ(s.code(), alone.code()) << s;
        EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(alone.message())));
        EXPECT_EQ(bad, bad_at);
        ASSERT_EQ(untouched, std::vector<float>(n, 7.0f));
      }
    }
  }
}

// FrameIntegrity::kVerifiedByCaller (the exchanges, whose frames' MACs are
// verified first) skips the checksum and nothing else: a frame whose
// checksum bytes are wrong averages to the intact frames' bits, while a
// truncated frame is still refused and named, with nothing written.
TEST(CodecTest, AuthenticatedFramesSkipTheChecksumAndNothingElse) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 300007;
  const size_t p = 3;
  for (const char* text : {"topk:ratio=0.1", "topk:ratio=0.01", "randomk:ratio=0.05,seed=3",
                           "qsgd:bits=6,bucket=512", "sign:bucket=64", "fp16", "none"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Codec> codec = Make(text);
    const std::vector<std::vector<uint8_t>> frames =
        SendersFrames(*codec, n, std::vector<uint64_t>(p, 5), rng);
    ASSERT_EQ(frames.size(), p);
    std::vector<absl::Span<const uint8_t>> views(frames.begin(), frames.end());
    std::vector<float> want(n), got(n);
    CodecScratch scratch;
    ASSERT_TRUE(codec->DecodeAverage(views, 3.0f, absl::MakeSpan(want), &scratch).ok());
    std::vector<uint8_t> bad_sum = frames[1];
    bad_sum.back() ^= 0x01;
    views[1] = bad_sum;
    size_t bad = 99;
    std::fill(got.begin(), got.end(), 7.0f);
    absl::Status s = codec->DecodeAverage(views, 3.0f, absl::MakeSpan(got), &scratch, &bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_EQ(bad, 1u);
    ASSERT_EQ(got, std::vector<float>(n, 7.0f));
    s = codec->DecodeAverage(views, 3.0f, absl::MakeSpan(got), &scratch, &bad, nullptr,
                             FrameIntegrity::kVerifiedByCaller);
    ASSERT_TRUE(s.ok()) << s;
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(got[i]), FloatBits(want[i])) << i;
    // One byte short: its sections no longer fit, checksum or not.
    const std::vector<uint8_t> short_frame(frames[2].begin(), frames[2].end() - 1);
    views[2] = short_frame;
    std::fill(got.begin(), got.end(), 7.0f);
    s = codec->DecodeAverage(views, 3.0f, absl::MakeSpan(got), &scratch, &bad, nullptr,
                             FrameIntegrity::kVerifiedByCaller);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(bad, 2u);
    ASSERT_EQ(got, std::vector<float>(n, 7.0f));
  }
}

// Range by range (32768 elements), the host's average reads delta-varint
// indices in groups of 64: frames whose selections are runs of
// consecutive indices starting at 1 to 4 put a group's last index on a
// range's first element and around it; the average is still the
// reference's bits.
TEST(CodecTest, DecodeAverageOfIndexRunsAcrossRangeEdges) {
  // Both of the host's ways: whole index lists and decoded as added.
  for (bool by_ranges : {false, true}) {
    SCOPED_TRACE(by_ranges ? "decoded as added" : "whole lists");
    const ForcedHostAverageWay way(by_ranges);
    const uint64_t n = 100000;
    std::unique_ptr<Codec> codec = Make("topk:ratio=0.5");
    const uint64_t k = 50000;
    std::vector<std::vector<uint8_t>> frames;
    for (uint64_t shift = 1; shift <= 4; ++shift) {
      // The k largest magnitudes at [shift, shift + k), all distinct.
      std::vector<float> grad(n);
      for (uint64_t i = 0; i < n; ++i) {
        const bool chosen = i >= shift && i < shift + k;
        grad[i] = chosen ? 1000.0f + static_cast<float>(i) : 1e-3f * static_cast<float>(i % 97);
      }
      std::vector<uint8_t> frame(codec->MaxEncodedBytes(n));
      absl::StatusOr<EncodeStats> stats = codec->Encode(grad, 5, {}, absl::MakeSpan(frame));
      ASSERT_TRUE(stats.ok()) << stats.status();
      frame.resize(stats->frame_bytes);
      frames.push_back(std::move(frame));
    }
    const std::vector<absl::Span<const uint8_t>> views(frames.begin(), frames.end());
    std::vector<float> want(n, 0.0f);
    for (const auto& f : frames) ASSERT_TRUE(codec->DecodeAccumulate(f, absl::MakeSpan(want)).ok());
    // The runs were chosen: [1, 4 + k) touched, the rest not.
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(want[i] != 0.0f, i >= 1 && i < 4 + k) << i;
    for (float divisor : {4.0f, 3.0f}) {
      std::vector<float> expect = want;
      for (float& x : expect) x /= divisor;
      std::vector<float> got(n, 42.0f);
      ASSERT_TRUE(codec->DecodeAverage(views, divisor, absl::MakeSpan(got)).ok());
      for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(FloatBits(got[i]), FloatBits(expect[i])) << i;
    }
  }
}

// The cast codecs checksum their frame chunk by chunk as the values are
// written: the frame is still header | values | XXH3-64 of all before it
// (one shot), the values those of element_math.h's cast of grad + residual,
// for lengths short of, at and across the kernel's chunks.
TEST(CodecTest, CastFramesAreHeaderValuesAndTheOneShotChecksum) {
  GRADWIRE_SEEDED_RNG(rng);
  for (const char* text : {"none", "fp16", "bf16"}) {
    for (uint64_t n : {0, 1, 43, 4095, 4096, 4097, 8192, 3 * 4096 + 17, 50000}) {
      for (bool ef : {false, true}) {
        SCOPED_TRACE(::testing::Message() << text << " n " << n << " ef " << ef);
        std::unique_ptr<Codec> codec = Make(text);
        const kernels::ValueFormat f = text[0] == 'n'   ? kernels::ValueFormat::kFp32
                                       : text[0] == 'f' ? kernels::ValueFormat::kFp16
                                                        : kernels::ValueFormat::kBf16;
        const std::vector<float> g = Gradient(n, rng), r0 = Gradient(n, rng);
        std::vector<float> residual = ef ? r0 : std::vector<float>();
        std::vector<uint8_t> frame(codec->MaxEncodedBytes(n), 0xee);
        absl::StatusOr<EncodeStats> st =
            codec->Encode(g, 5, absl::MakeSpan(residual), absl::MakeSpan(frame));
        ASSERT_TRUE(st.ok()) << st.status();
        const uint64_t w = kernels::ValueWidth(f);
        ASSERT_EQ(st->frame_bytes, kFrameHeaderBytes + w * n + kFrameChecksumBytes);
        const size_t covered = st->frame_bytes - kFrameChecksumBytes;
        uint64_t trailer = 0;
        for (int b = 7; b >= 0; --b) trailer = trailer << 8 | frame[covered + b];
        EXPECT_EQ(trailer, XXH3_64bits(frame.data(), covered));
        std::vector<uint8_t> want(w * n);
        for (uint64_t i = 0; i < n; ++i) {
          kernels::StoreValue(want.data(), i, ef ? g[i] + r0[i] : g[i], f);
        }
        EXPECT_TRUE(std::equal(want.begin(), want.end(), frame.begin() + kFrameHeaderBytes));
      }
    }
  }
}

TEST(CodecTest, RandomKIndicesAreNotSentButAgreeAcrossRanks) {
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 5000;
  std::unique_ptr<Codec> rank0 = Make("randomk:ratio=0.02,seed=42");
  std::unique_ptr<Codec> rank1 = Make("randomk:ratio=0.02,seed=42");
  const std::vector<float> g0 = Gradient(n, rng), g1 = Gradient(n, rng);
  std::vector<uint8_t> f0(rank0->MaxEncodedBytes(n)), f1(rank1->MaxEncodedBytes(n));
  ASSERT_TRUE(rank0->Encode(g0, 9, {}, absl::MakeSpan(f0)).ok());
  ASSERT_TRUE(rank1->Encode(g1, 9, {}, absl::MakeSpan(f1)).ok());
  EXPECT_EQ(f0.size(), kFrameHeaderBytes + kFrameChecksumBytes + 100 * 4);  // values only
  std::vector<float> d0(n, 0.0f), d1(n, 0.0f);
  ASSERT_TRUE(rank1->DecodeAccumulate(f0, absl::MakeSpan(d0)).ok());
  ASSERT_TRUE(rank0->DecodeAccumulate(f1, absl::MakeSpan(d1)).ok());
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(d0[i] != 0.0f, d1[i] != 0.0f) << i;  // same support on both ranks
    if (d0[i] != 0.0f) {
      ASSERT_EQ(d0[i], g0[i]);
      ASSERT_EQ(d1[i], g1[i]);
    }
  }
}

// Frames of the codecs whose bytes changed meaning, from a build before the
// change (their version byte 1), are refused, dense untouched, by
// DecodeAccumulate and DecodeAverage: a random-k frame of the version-1
// element hash would re-derive to other indices here, a QSGD frame of the
// version-1 levels (RN(RN((2q - M) / M) * s)) decodes a float or so away
// from what its sender subtracted.
TEST(CodecTest, FramesOfTheOldVersionOfAChangedCodecAreRefused) {
  struct Case {
    const char* spec;
    uint8_t version;
    const char* refusal;
  };
  const Case cases[] = {
      {"randomk:ratio=0.02,seed=42", kRandomKFrameVersion, "random-k frame of version 1"},
      {"qsgd:bits=6,bucket=512", kQsgdFrameVersion, "qsgd frame of version 1"},
  };
  GRADWIRE_SEEDED_RNG(rng);
  const uint64_t n = 5000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    std::unique_ptr<Codec> codec = Make(c.spec);
    const std::vector<float> g = Gradient(n, rng);
    std::vector<uint8_t> f(codec->MaxEncodedBytes(n));
    absl::StatusOr<EncodeStats> stats = codec->Encode(g, 9, {}, absl::MakeSpan(f));
    ASSERT_TRUE(stats.ok()) << stats.status();
    f.resize(stats->frame_bytes);
    EXPECT_EQ(f[4], c.version);
    f[4] = 1;
    std::vector<float> dense(n, 7.0f);
    absl::Status s = codec->DecodeAccumulate(f, absl::MakeSpan(dense));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(c.refusal));
    EXPECT_EQ(dense, std::vector<float>(n, 7.0f));
    const std::vector<absl::Span<const uint8_t>> frames = {f};
    size_t bad = 0;
    s = codec->DecodeAverage(frames, 1, absl::MakeSpan(dense), nullptr, &bad);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(dense, std::vector<float>(n, 7.0f));
  }
}

TEST(CodecTest, NonFiniteGradientIsCountedAndDoesNotPoisonTheResidual) {
  for (const char* text : {"topk:ratio=0.1", "approx_topk:ratio=0.1", "randomk:ratio=0.1",
                           "qsgd:bits=4", "sign", "fp16", "bf16"}) {
    SCOPED_TRACE(text);
    std::unique_ptr<Codec> codec = Make(text);
    std::vector<float> grad(300, 0.25f), residual(300, 0.0f);
    grad[10] = std::nanf("");
    grad[20] = std::numeric_limits<float>::infinity();
    std::vector<uint8_t> frame(codec->MaxEncodedBytes(300));
    absl::StatusOr<EncodeStats> stats =
        codec->Encode(grad, 0, absl::MakeSpan(residual), absl::MakeSpan(frame));
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->nonfinite, 2u);
    for (float r : residual) ASSERT_TRUE(std::isfinite(r));
  }
}

// A loss scaler (AMP's GradScaler) skips a step when the averaged gradient
// is non-finite: one rank's NaN or infinity must reach every receiver,
// whatever the codec selected or quantized (without the frame's flag,
// selection drops a NaN and the quantizers zero a non-finite bucket).
TEST(CodecTest, NonFiniteInputDecodesAsNaNEverywhere) {
  constexpr uint64_t n = 4096;
  const float bad_values[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (const char* text :
       {"none", "fp16", "bf16", "topk:ratio=0.01", "approx_topk:ratio=0.01", "randomk:ratio=0.01",
        "qsgd:bits=4", "qsgd:bits=8,bucket=128", "sign", "topk:ratio=0.01,values=fp16"}) {
    std::unique_ptr<Codec> codec = Make(text);
    std::vector<float> clean(n), residual(n, 0.0f);
    for (uint64_t i = 0; i < n; ++i) clean[i] = std::sin(0.37f * static_cast<float>(i));
    std::vector<uint8_t> good(codec->MaxEncodedBytes(n));
    absl::StatusOr<EncodeStats> encoded =
        codec->Encode(clean, 1, absl::MakeSpan(residual), absl::MakeSpan(good));
    ASSERT_TRUE(encoded.ok()) << text;
    good.resize(encoded->frame_bytes);
    EXPECT_FALSE(FrameIsNonFinite(good)) << text;
    for (const uint64_t at : {uint64_t{0}, uint64_t{1234}, n - 1}) {
      for (const float bad_value : bad_values) {
        SCOPED_TRACE(absl::StrCat(text, " at ", at, ": ", bad_value));
        std::vector<float> grad = clean;
        grad[at] = bad_value;
        std::fill(residual.begin(), residual.end(), 0.0f);
        std::vector<uint8_t> bad(codec->MaxEncodedBytes(n));
        encoded = codec->Encode(grad, 1, absl::MakeSpan(residual), absl::MakeSpan(bad));
        ASSERT_TRUE(encoded.ok());
        EXPECT_EQ(encoded->nonfinite, 1u);
        bad.resize(encoded->frame_bytes);
        ASSERT_TRUE(FrameIsNonFinite(bad));
        EXPECT_EQ(bad[9], kFlagErrorFeedback | kFlagNonFinite);
        for (float r : residual) ASSERT_TRUE(std::isfinite(r));

        std::vector<float> dense(n, 1.0f);
        ASSERT_TRUE(codec->DecodeAccumulate(bad, absl::MakeSpan(dense)).ok());
        for (float d : dense) ASSERT_TRUE(std::isnan(d));
        // In an average, any flagged frame makes every element NaN...
        std::vector<float> avg(n, 1.0f);
        const absl::Span<const uint8_t> frames[] = {good, bad, good};
        ASSERT_TRUE(codec->DecodeAverage(frames, 3.0f, absl::MakeSpan(avg)).ok());
        for (float v : avg) ASSERT_TRUE(std::isnan(v));
        // ...and without one nothing is.
        const absl::Span<const uint8_t> clean_frames[] = {good, good};
        ASSERT_TRUE(codec->DecodeAverage(clean_frames, 2.0f, absl::MakeSpan(avg)).ok());
        for (float v : avg) ASSERT_TRUE(std::isfinite(v));
      }
    }
  }
}

TEST(CodecTest, MakeCodecValidatesTheSpec) {
  CompressionSpec spec;
  spec.method = Method::kQsgd;
  spec.quant_bits = 0;
  absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(spec);
  EXPECT_FALSE(codec.ok());
  EXPECT_THAT(std::string(codec.status().message()), HasSubstr("--quant_bits"));
}

}  // namespace
}  // namespace gradwire
