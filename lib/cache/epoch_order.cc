#include "gradwire/lib/cache/epoch_order.h"

#include <numeric>

#include "absl/strings/str_cat.h"

namespace gradwire {
namespace cache {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (rejection sampling).
uint64_t Below(uint64_t n, uint64_t* state) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = SplitMix64(state);
  } while (x >= limit);
  return x % n;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> EpochOrder(const std::vector<std::string>& keys,
                                                    uint64_t seed, uint64_t epoch, int rank,
                                                    int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch order: rank ", rank, " is not in [0, world=", world, ")"));
  }
  std::vector<size_t> perm(keys.size());
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = seed ^ (0xd1b54a32d192ed03ULL * (epoch + 1));
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[Below(i, &state)]);
  std::vector<std::string> out;
  out.reserve(keys.size() / world + 1);
  for (size_t i = static_cast<size_t>(rank); i < perm.size(); i += static_cast<size_t>(world)) {
    out.push_back(keys[perm[i]]);
  }
  return out;
}

}  // namespace cache
}  // namespace gradwire
