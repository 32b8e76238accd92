// Compiles and runs against @gradwire//:gradwire from outside the project:
// the public header resolves under the gradwire/ prefix and the library links.
#include "gradwire/gradwire.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

TEST(ConsumerTest, HostBufferDispatchesToTheCpu) {
  std::vector<float> v(16, 1.0f);
  EXPECT_EQ(gradwire::kernels::Locate(v.data()), gradwire::kernels::Location::kHost);
}

TEST(ConsumerTest, EncodesAndDecodesThroughThePublicHeader) {
  absl::StatusOr<gradwire::CompressionSpec> spec =
      gradwire::CompressionSpec::Parse("topk:ratio=0.1,indices=varint");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<gradwire::Codec>> codec = gradwire::MakeCodec(*spec);
  ASSERT_TRUE(codec.ok()) << codec.status();
  gradwire::ErrorFeedback ef(**codec);
  std::vector<float> grad(100);
  for (int i = 0; i < 100; ++i) grad[i] = static_cast<float>(i % 10) - 4.5f;
  std::vector<uint8_t> frame((*codec)->MaxEncodedBytes(grad.size()));
  absl::StatusOr<gradwire::EncodeStats> stats = ef.Encode("w", grad, 0, absl::MakeSpan(frame));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->selected, 10u);
  std::vector<float> sum(100, 0.0f);
  ASSERT_TRUE((*codec)->DecodeAccumulate(absl::MakeSpan(frame.data(), stats->frame_bytes),
                                         absl::MakeSpan(sum))
                  .ok());
  // What was sent plus what error feedback kept is the gradient.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sum[i] + ef.Residual("w")[i], grad[i]);
}
