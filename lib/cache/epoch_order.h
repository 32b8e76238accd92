// The order in which a rank reads a dataset in a shuffled epoch.
//
// Every rank computes the same permutation from (seed, epoch) and takes
// every world-th position starting at its rank, so the ranks together read
// each key exactly once per epoch (the last |keys| mod world positions go
// to the lowest ranks: no padding, no duplicates). The shuffle is our own
// Fisher-Yates over SplitMix64, identical on every platform and library
// version, because ranks that disagreed would read overlapping data.
#ifndef GRADWIRE_LIB_CACHE_EPOCH_ORDER_H_
#define GRADWIRE_LIB_CACHE_EPOCH_ORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradwire {
namespace cache {

absl::StatusOr<std::vector<std::string>> EpochOrder(const std::vector<std::string>& keys,
                                                    uint64_t seed, uint64_t epoch, int rank,
                                                    int world);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_EPOCH_ORDER_H_
