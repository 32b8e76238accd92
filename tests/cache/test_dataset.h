// Helpers shared by the cache tests: scratch directories and a small
// synthetic packed dataset whose every byte is known.
#ifndef GRADWIRE_TESTS_CACHE_TEST_DATASET_H_
#define GRADWIRE_TESTS_CACHE_TEST_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gradwire/lib/cache/manifest.h"

namespace gradwire {
namespace cache {
namespace testing {

// The job token the tests' data servers require.
inline constexpr char kToken[] = "job-7f3a-secret";

// A fresh empty directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& tag);

// Deterministic content of sample `index` of `split`: sizes vary between
// min_bytes and min_bytes + 63 so length bugs show.
std::string SampleBytes(const std::string& split, uint64_t index, size_t min_bytes = 100);

// SampleBytes of the sample named by `key` ("<split>/<index>").
std::string SampleBytesOf(const std::string& key, size_t min_bytes = 100);

// Packs `train_samples` + `test_samples` samples into `dir`.
Manifest PackSynthetic(const std::string& dir, uint64_t train_samples, uint64_t test_samples,
                       size_t samples_per_shard, size_t min_bytes = 100,
                       const std::string& dataset_id = "synthetic");

// Names in `dir` (not . or ..).
std::vector<std::string> ListDir(const std::string& dir);

}  // namespace testing
}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_CACHE_TEST_DATASET_H_
