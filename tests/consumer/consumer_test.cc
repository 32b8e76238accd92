// Compiles and runs against @gradwire//:gradwire from outside the project:
// the public header resolves under the gradwire/ prefix and the library links.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

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
  ASSERT_TRUE(
      (*codec)
          ->DecodeAccumulate(absl::MakeSpan(frame.data(), stats->frame_bytes), absl::MakeSpan(sum))
          .ok());
  // What was sent plus what error feedback kept is the gradient.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sum[i] + ef.Residual("w")[i], grad[i]);
}

// The whole stack links and runs from outside: a one-rank job joins through
// a file store and averages a compressed gradient (a mean over one rank is
// what the codec delivered, so nothing may come back as NaN or unchanged
// garbage: the top-k elements must survive exactly).
TEST(ConsumerTest, OneRankCommunicatorAveragesThroughTheFullStack) {
  gradwire::transport::RendezvousConfig config;
  config.rank = 0;
  config.world_size = 1;
  config.store_dir = testing::TempDir();
  config.job_id = "consumer-test";
  absl::StatusOr<gradwire::transport::RendezvousConfig> full =
      gradwire::transport::ConfigFromEnvironment(config, [](const std::string&) {
        return std::optional<std::string>();  // ignore the test's environment
      });
  ASSERT_TRUE(full.ok()) << full.status();
  absl::StatusOr<gradwire::JobSecret> secret =
      gradwire::JobSecret::FromValue("a consumer's job secret", "test");
  ASSERT_TRUE(secret.ok()) << secret.status();
  gradwire::CommunicatorOptions options;
  options.compression = *gradwire::CompressionSpec::Parse("topk:ratio=0.01");
  // The cost model's figures by name, as the tools' --exchange_model takes them.
  absl::StatusOr<gradwire::ExchangeModel> model =
      gradwire::ParseExchangeModel("bytes_per_second=1.25e8,seconds_per_round=2e-4");
  ASSERT_TRUE(model.ok()) << model.status();
  options.exchange_model = *model;
  absl::StatusOr<std::unique_ptr<gradwire::Communicator>> comm =
      gradwire::Communicator::Connect(*full, *secret, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->exchange_model().bytes_per_second, 1.25e8);

  std::vector<float> grad(1 << 16);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = (i % 97 == 0) ? 100.0f + i : 0.001f;
  std::vector<float> data = grad;
  ASSERT_EQ((*comm)->PathFor(data.size(), /*one_dimensional=*/false),
            gradwire::ExchangePath::kCompressed);
  ASSERT_TRUE(
      (*comm)->AllreduceMean(0, 0, absl::MakeSpan(data), gradwire::ExchangePath::kCompressed).ok());
  // k = 1 % of 65536 = 655 elements; the 676 spikes are the largest, so the
  // 655 largest spikes come back exactly and everything else is zero.
  int kept = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != 0.0f) {
      ++kept;
      EXPECT_EQ(data[i], grad[i]) << "at " << i;
    }
  }
  EXPECT_EQ(kept, 655);
  EXPECT_TRUE((*comm)->Close().ok());
}
