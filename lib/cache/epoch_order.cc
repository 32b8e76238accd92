#include "gradwire/lib/cache/epoch_order.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"

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

// A permutation of [0, n) drawn from `state`: Fisher-Yates.
std::vector<size_t> Shuffled(size_t n, uint64_t state) {
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[Below(i, &state)]);
  return perm;
}

absl::Status CheckRank(int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch order: rank ", rank, " is not in [0, world=", world, ")"));
  }
  return absl::OkStatus();
}

// keys[perm[i]] for i = rank, rank + world, ...
std::vector<size_t> RankShare(const std::vector<size_t>& perm, int rank, int world) {
  std::vector<size_t> out;
  out.reserve(perm.size() / world + 1);
  for (size_t i = static_cast<size_t>(rank); i < perm.size(); i += static_cast<size_t>(world)) {
    out.push_back(perm[i]);
  }
  return out;
}

std::vector<std::string> Pick(const std::vector<std::string>& keys,
                              const std::vector<size_t>& which) {
  std::vector<std::string> out;
  out.reserve(which.size());
  for (size_t i : which) out.push_back(keys[i]);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> EpochOrder(const std::vector<std::string>& keys,
                                                    uint64_t seed, uint64_t epoch, int rank,
                                                    int world) {
  GRADWIRE_RETURN_IF_ERROR(CheckRank(rank, world));
  const uint64_t state = seed ^ (0xd1b54a32d192ed03ULL * (epoch + 1));
  return Pick(keys, RankShare(Shuffled(keys.size(), state), rank, world));
}

absl::StatusOr<std::vector<std::string>> StickyEpochOrder(const std::vector<std::string>& keys,
                                                          uint64_t seed, uint64_t epoch, int rank,
                                                          int world) {
  GRADWIRE_RETURN_IF_ERROR(CheckRank(rank, world));
  // The partition: from the seed alone, so every epoch gives a rank the same shard.
  const std::vector<size_t> shard =
      RankShare(Shuffled(keys.size(), seed ^ 0x8cb92ba72f3d8dd7ULL), rank, world);
  // The order within the shard: new each epoch.
  uint64_t mix = seed ^ (0xd1b54a32d192ed03ULL * (epoch + 1)) ^
                 (0xaef17502108ef2d9ULL * (static_cast<uint64_t>(rank) + 1));
  std::vector<size_t> order = Shuffled(shard.size(), SplitMix64(&mix));
  for (size_t& i : order) i = shard[i];
  return Pick(keys, order);
}

}  // namespace cache
}  // namespace gradwire
