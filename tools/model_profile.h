// A model profile: the shapes of a model's parameter tensors, one
// "d0xd1x..." per line in forward order, as tools/model_profiles.py
// prints them (`python3 tools/model_profiles.py resnet50`). The
// benchmarks read one from a file or from that script; both are outside
// input, so every count is bounded and nothing goes through a shell.
#ifndef GRADWIRE_TOOLS_MODEL_PROFILE_H_
#define GRADWIRE_TOOLS_MODEL_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace tools {

// The most parameters a profile may have: 2^32 floats, far beyond any
// model these tools run (a benchmark holds two copies: 32 GiB).
inline constexpr uint64_t kMaxProfileParams = uint64_t{1} << 32;
// Profile text longer than this is not a list of shapes.
inline constexpr size_t kMaxProfileBytes = size_t{64} << 20;

using Shapes = std::vector<std::vector<int64_t>>;

// The shapes in `text`. Refused (InvalidArgument naming the line): a
// dimension that is not a decimal integer >= 0, more than
// kMaxProfileParams parameters in all (products cannot wrap on the way),
// no tensors, or no parameters.
absl::StatusOr<Shapes> ParseProfile(absl::string_view text);

// ParseProfile of the regular file at `path`: NotFound naming errno when
// it cannot be opened, InvalidArgument for a directory or device, or a
// file over kMaxProfileBytes.
absl::StatusOr<Shapes> ReadProfileFile(const std::string& path);

// ParseProfile of `python3 SCRIPT NAME` (or `python3 SCRIPT --params N`
// when params > 0), run from an argument vector with python3 from PATH.
// NAME must be letters, digits, '_' and '-', not starting with '-';
// params at most kMaxProfileParams. The script failing is InvalidArgument
// (an unknown profile, or SCRIPT not found).
absl::StatusOr<Shapes> RunModelProfiles(const std::string& script, const std::string& name,
                                        int64_t params);

// One tensor of a profile, as the benchmarks exchange it: "param<i>" (i
// its forward index), its shape, a gradient to exchange and the pristine
// copy a step starts from.
struct ProfileTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> grad;
  std::vector<float> pristine;
};

// The tensors of `shapes` in backprop (reverse) order, each with a
// rank-specific, roughly N(0, 1) gradient (a sum of four uniforms from a
// xorshift seeded by the rank); *params their element count.
// ResourceExhausted when memory runs out (the shapes' total is bounded by
// ParseProfile; it may still be more than this machine holds).
absl::StatusOr<std::vector<ProfileTensor>> MakeProfileTensors(const Shapes& shapes, int rank,
                                                              uint64_t* params);

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_MODEL_PROFILE_H_
