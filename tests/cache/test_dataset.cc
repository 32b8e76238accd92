#include "gradwire/tests/cache/test_dataset.h"

#include <dirent.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/dataset_packer.h"

namespace gradwire {
namespace cache {
namespace testing {

std::string MakeTempDir(const std::string& tag) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(root != nullptr ? root : "/tmp", "/", tag, ".XXXXXX");
  if (mkdtemp(&templ[0]) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return templ;
}

std::string SampleBytes(const std::string& split, uint64_t index, size_t min_bytes) {
  uint64_t state = index * 0x9e3779b97f4a7c15ULL + split.size() * 7919 + split[0];
  size_t n = min_bytes + static_cast<size_t>(index % 64);
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out[i] = static_cast<char>(state >> 56);
  }
  return out;
}

std::string SampleBytesOf(const std::string& key, size_t min_bytes) {
  const size_t slash = key.find('/');
  return SampleBytes(key.substr(0, slash), std::stoull(key.substr(slash + 1)), min_bytes);
}

Manifest PackSynthetic(const std::string& dir, uint64_t train_samples, uint64_t test_samples,
                       size_t samples_per_shard, size_t min_bytes, const std::string& dataset_id) {
  std::vector<SplitRecords> splits(2);
  splits[0].split = "train";
  for (uint64_t i = 0; i < train_samples; ++i) {
    splits[0].records.push_back(SampleBytes("train", i, min_bytes));
  }
  splits[1].split = "test";
  for (uint64_t i = 0; i < test_samples; ++i) {
    splits[1].records.push_back(SampleBytes("test", i, min_bytes));
  }
  absl::StatusOr<Manifest> m = PackDataset(dir, dataset_id, splits, samples_per_shard);
  if (!m.ok()) {
    std::fprintf(stderr, "PackSynthetic: %s\n", m.status().ToString().c_str());
    std::abort();
  }
  return *m;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

}  // namespace testing
}  // namespace cache
}  // namespace gradwire
