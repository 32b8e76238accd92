// The order in which a rank reads a dataset in a shuffled epoch.
//
// Every rank computes the same permutation from (seed, epoch) and takes
// every world-th position starting at its rank, so the ranks together read
// each key exactly once per epoch (the last |keys| mod world positions go
// to the lowest ranks: no padding, no duplicates). The shuffle is our own
// Fisher-Yates over SplitMix64, identical on every platform and library
// version, because ranks that disagreed would read overlapping data.
//
// EpochOrder is DistributedSampler's order: the whole dataset is reshuffled
// across the ranks each epoch, so a rank reads a different quarter (at 4
// ranks) every epoch and over e epochs touches 1 - (1 - 1/world)^e of the
// dataset. Tiers private to a rank then serve only the overlap with what it
// read before: 1 - (1 - 1/world)^(e-1) of epoch e (25 % of epoch 2, 44 % of
// epoch 3 at 4 ranks), however large they are, and each rank's tiers must
// hold the whole dataset before they stop missing.
//
// StickyEpochOrder keeps each rank on one shard for the whole run (the
// partition depends on the seed only, not on the epoch) and reshuffles
// within the shard each epoch, as DALI's stick_to_shard does. The ranks
// still read each key exactly once per epoch, but a rank's tiers need only
// hold its shard (|keys|/world) to serve every epoch after the first.
// Batches mix only the examples of one shard: for data in no particular
// order (shards are drawn at random) that changes no expectation.
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

absl::StatusOr<std::vector<std::string>> StickyEpochOrder(const std::vector<std::string>& keys,
                                                          uint64_t seed, uint64_t epoch, int rank,
                                                          int world);

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_EPOCH_ORDER_H_
