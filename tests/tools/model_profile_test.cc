// tools/model_profile.h: shapes from text, files and model_profiles.py,
// with the bounds hostile input needs.
#include "gradwire/tools/model_profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace tools {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempDir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

TEST(ModelProfile, ParsesShapes) {
  absl::StatusOr<Shapes> s = ParseProfile("64x3x7x7\n64\n\n  10 \n0x5\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0], (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ((*s)[2], (std::vector<int64_t>{10}));
  EXPECT_EQ((*s)[3], (std::vector<int64_t>{0, 5}));  // empty tensors are kept
}

TEST(ModelProfile, RefusesWhatIsNoProfile) {
  for (const char* text :
       {"", "\n\n", "0\n5x0\n", "10x-1\n", "10xx2\n", "abc\n", "1e3\n", "4294967296x4294967296\n",
        "99999999999x99999999999\n", "65536x65536\n1\n", "4294967296x4294967296\n10\n",
        "3x6148914691236517206\n7\n"}) {
    EXPECT_EQ(ParseProfile(text).status().code(), absl::StatusCode::kInvalidArgument)
        << "\"" << text << "\"";
  }
  // Exactly the limit is fine; one more is not, however the lines split it.
  EXPECT_TRUE(ParseProfile("65536x65536\n").ok());
  EXPECT_FALSE(ParseProfile("65536x32768\n32768x65536\n1\n").ok());
}

TEST(ModelProfile, FilesAreRegularAndBounded) {
  EXPECT_TRUE(ReadProfileFile(WriteFile("ok.txt", "3x3\n")).ok());
  EXPECT_EQ(ReadProfileFile(TempDir()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadProfileFile(TempDir() + "/none").status().code(), absl::StatusCode::kNotFound);
  const absl::Status bad = ReadProfileFile(WriteFile("bad.txt", "3x\x01\n")).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("bad.txt"), absl::string_view::npos) << bad;
  std::string big(kMaxProfileBytes + 2, '\n');
  EXPECT_EQ(ReadProfileFile(WriteFile("big.txt", big)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelProfile, RunsTheScriptWithoutAShell) {
  const std::string script = "tools/model_profiles.py";  // runfiles: the workspace root
  absl::StatusOr<Shapes> resnet = RunModelProfiles(script, "resnet50", 0);
  ASSERT_TRUE(resnet.ok()) << resnet.status();
  EXPECT_EQ(resnet->size(), 161u);
  absl::StatusOr<Shapes> synthetic = RunModelProfiles(script, "", 1000);
  ASSERT_TRUE(synthetic.ok()) << synthetic.status();
  const std::string marker = TempDir() + "/ran";
  for (const std::string& name :
       {std::string("resnet50; touch ") + marker, std::string("-h"), std::string("a b"),
        std::string(""), std::string("$(touch ") + marker + ")"}) {
    EXPECT_EQ(RunModelProfiles(script, name, 0).status().code(), absl::StatusCode::kInvalidArgument)
        << name;
  }
  struct stat st;
  EXPECT_NE(stat(marker.c_str(), &st), 0) << "a profile name ran a shell command";
  EXPECT_EQ(RunModelProfiles(script, "no_such_model", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunModelProfiles(script, "", int64_t{1} << 40).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The benchmarks' gradients: backprop order, named by forward index,
// every element set, the same per rank and different across ranks.
TEST(ModelProfile, TensorsComeInBackpropOrderWithRankGradients) {
  const Shapes shapes = {{3, 4}, {5}, {2, 2, 2}};
  uint64_t params = 0;
  absl::StatusOr<std::vector<ProfileTensor>> r0 = MakeProfileTensors(shapes, 0, &params);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(params, 25u);
  ASSERT_EQ(r0->size(), 3u);
  EXPECT_EQ((*r0)[0].name, "param2");
  EXPECT_EQ((*r0)[0].shape, shapes[2]);
  EXPECT_EQ((*r0)[2].name, "param0");
  EXPECT_EQ((*r0)[2].pristine.size(), 12u);
  float biggest = 0;
  for (const ProfileTensor& t : *r0) {
    EXPECT_EQ(t.grad, t.pristine);
    for (float v : t.pristine) biggest = std::max(biggest, std::abs(v));
  }
  EXPECT_GT(biggest, 0.1f);
  EXPECT_LE(biggest, 3.4f);  // four uniforms in [-0.5, 0.5) times 1.7
  absl::StatusOr<std::vector<ProfileTensor>> again = MakeProfileTensors(shapes, 0, &params);
  absl::StatusOr<std::vector<ProfileTensor>> r1 = MakeProfileTensors(shapes, 1, &params);
  EXPECT_EQ((*again)[1].pristine, (*r0)[1].pristine);
  EXPECT_NE((*r1)[1].pristine, (*r0)[1].pristine);
}

}  // namespace
}  // namespace tools
}  // namespace gradwire
