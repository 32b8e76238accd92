// Our calls return with the vector registers' upper halves clean.
//
// Code that leaves the upper 128 (or 384) bits of ymm/zmm0-15 dirty, that
// is, returns from AVX code without vzeroupper, makes every legacy-SSE
// instruction after it (all of our code built for the x86-64 baseline:
// its scalar float math, the varint decoder) carry a false dependency on
// them until something clears them. libxxhash's dispatching XXH3 does
// (base/envelope.cc clears the state after it): a top-k 10 % frame's
// varint indices decoded in 67 us after one checksum, 24 us without.
//
// XGETBV with ECX = 1 reads XINUSE: bit 2 (YMM_Hi128) and bit 6
// (ZMM_Hi256) are set while those halves are not in their initial state.
// Where the CPU cannot say (no AVX, or no XGETBV ECX = 1), each test
// prints SKIPPED.
#include <cpuid.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/base/envelope.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gtest/gtest.h"
#include "tests/synthetic_gradient.h"

namespace gradwire {
namespace {

constexpr uint64_t kDirtyUpper = (uint64_t{1} << 2) | (uint64_t{1} << 6);

bool CanReadXinuse() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx) return false;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d)) return false;
  return (a >> 2) & 1;  // XGETBV with ECX = 1
#else
  return false;
#endif
}

uint64_t Xinuse() {
#if defined(__x86_64__)
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (uint64_t{hi} << 32) | lo;
#else
  return 0;
#endif
}

#define SKIP_UNLESS_XINUSE()                                                          \
  if (!CanReadXinuse()) {                                                             \
    std::printf("SKIPPED: this CPU cannot report its vector state (XGETBV ECX=1)\n"); \
    return;                                                                           \
  }

TEST(UpperStateTest, ChecksumsLeaveItClean) {
  SKIP_UNLESS_XINUSE();
  std::vector<uint8_t> bytes(1 << 20, 7);
  for (size_t n : {size_t{64}, size_t{4096}, bytes.size()}) {
    (void)Checksum64(bytes.data(), n);
    EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after Checksum64 of " << n << " bytes";
    StreamingChecksum64 sum;
    sum.Update(bytes.data(), n);
    EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after StreamingChecksum64::Update of " << n;
    (void)sum.Digest();
    EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after StreamingChecksum64::Digest of " << n;
  }
}

// Every codec's encode (with error feedback) and decode-average, the calls
// a training step makes, return clean.
TEST(UpperStateTest, EveryCodecLeavesItClean) {
  SKIP_UNLESS_XINUSE();
  const uint64_t n = (1 << 18) + 77;
  const std::vector<float> grad = testing::SyntheticGradient(n, /*salt=*/5);
  for (const char* text : {"topk:ratio=0.1", "topk:ratio=0.01,values=fp16", "approx_topk:ratio=0.1",
                           "randomk:ratio=0.1", "qsgd:bits=2", "qsgd:bits=4", "qsgd:bits=8", "sign",
                           "fp16", "bf16", "none"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<CompressionSpec> spec = CompressionSpec::Parse(text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::unique_ptr<Codec>> codec = MakeCodec(*spec);
    ASSERT_TRUE(codec.ok()) << codec.status();
    std::vector<float> residual(n, 0.0f);
    std::vector<std::vector<uint8_t>> frames(2, std::vector<uint8_t>((*codec)->MaxEncodedBytes(n)));
    CodecScratch scratch;
    for (auto& frame : frames) {
      absl::StatusOr<EncodeStats> stats = (*codec)->Encode(
          grad, /*step=*/3, absl::MakeSpan(residual), absl::MakeSpan(frame), &scratch);
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after Encode";
      frame.resize(stats->frame_bytes);
    }
    std::vector<absl::Span<const uint8_t>> views(frames.begin(), frames.end());
    std::vector<float> out(n);
    size_t bad = 0;
    ASSERT_TRUE((*codec)->DecodeAverage(views, 2, absl::MakeSpan(out), &scratch, &bad).ok());
    EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after DecodeAverage";
  }
}

// Signing and verifying a frame (OpenSSL's HMAC-SHA256) return clean.
TEST(UpperStateTest, FrameAuthenticationLeavesItClean) {
  SKIP_UNLESS_XINUSE();
  absl::StatusOr<JobSecret> secret =
      JobSecret::FromValue("0123456789abcdef0123456789abcdef", "test");
  ASSERT_TRUE(secret.ok()) << secret.status();
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(*secret, "job");
  ASSERT_TRUE(auth.ok()) << auth.status();
  const size_t n = 1 << 20;
  std::vector<uint8_t> frame(n + auth->trailer_bytes(), 3);
  const FrameOrigin origin{1, 2, 0};
  absl::StatusOr<size_t> len = auth->Sign(absl::MakeSpan(frame), n, origin);
  ASSERT_TRUE(len.ok()) << len.status();
  EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after Sign";
  ASSERT_TRUE(auth->Verify(absl::MakeConstSpan(frame.data(), *len), origin).ok());
  EXPECT_EQ(Xinuse() & kDirtyUpper, 0u) << "after Verify";
}

}  // namespace
}  // namespace gradwire
