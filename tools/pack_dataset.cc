// pack_dataset: packs Fashion-MNIST (IDX files) into gradwire shards plus a
// manifest, the form the data server and DirectorySource serve.
//
//   pack_dataset --source_dir=/usr/share/datasets/fashion-mnist --out_dir=/tmp/fmnist
//
// Each sample is its label byte followed by its 28x28 pixels (785 bytes);
// keys are "train/<i>" (60000) and "test/<i>" (10000).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/dataset_packer.h"
#include "gradwire/tools/command_line.h"
#include "gradwire/tools/idx_file.h"

ABSL_FLAG(std::string, source_dir, "/usr/share/datasets/fashion-mnist",
          "directory holding the IDX files (plain or .gz)");
ABSL_FLAG(std::string, out_dir, "", "where to write shards and MANIFEST (required)");
ABSL_FLAG(std::string, dataset_id, "fashion-mnist", "dataset id recorded in the manifest");
ABSL_FLAG(int, samples_per_shard, 5000, "samples per shard file");

namespace {

absl::StatusOr<gradwire::cache::SplitRecords> ReadSplit(const std::string& dir,
                                                        const std::string& split,
                                                        const std::string& prefix) {
  auto images = gradwire::tools::ReadIdxFile(absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte"));
  if (!images.ok()) return images.status();
  auto labels = gradwire::tools::ReadIdxFile(absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte"));
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 || labels->dims.size() != 1 || images->dims[0] != labels->dims[0]) {
    return absl::DataLossError(absl::StrCat(prefix, ": images and labels disagree in shape"));
  }
  // A pack with no samples in a split, or samples of no pixels, served
  // nothing a training job could use; it is refused with the file's name.
  const uint64_t item = images->item_bytes();
  if (images->dims[0] == 0 || item == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, "/", prefix, "-images-idx3-ubyte: ",
        images->dims[0] == 0 ? "holds no samples" : "its samples hold no pixels",
        "; nothing to pack for the ", split, " split"));
  }
  gradwire::cache::SplitRecords out;
  out.split = split;
  for (uint32_t i = 0; i < images->dims[0]; ++i) {
    std::string record(1, labels->data[i]);
    record.append(images->data, i * item, item);
    out.records.push_back(std::move(record));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "pack_dataset", &exit_code)) return exit_code;
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  const int per_shard = absl::GetFlag(FLAGS_samples_per_shard);
  if (out_dir.empty() || per_shard <= 0) {
    std::fprintf(stderr,
                 "pack_dataset: --out_dir is required and --samples_per_shard must be > 0\n");
    return 2;
  }
  std::vector<gradwire::cache::SplitRecords> splits;
  for (auto [split, prefix] : {std::pair<std::string, std::string>{"train", "train"},
                               std::pair<std::string, std::string>{"test", "t10k"}}) {
    auto records = ReadSplit(absl::GetFlag(FLAGS_source_dir), split, prefix);
    if (!records.ok()) {
      std::fprintf(stderr, "pack_dataset: %s\n", records.status().ToString().c_str());
      return 1;
    }
    splits.push_back(*std::move(records));
  }
  auto manifest = gradwire::cache::PackDataset(out_dir, absl::GetFlag(FLAGS_dataset_id), splits,
                                               static_cast<size_t>(per_shard));
  if (!manifest.ok()) {
    std::fprintf(stderr, "pack_dataset: %s\n", manifest.status().ToString().c_str());
    return 1;
  }
  std::printf("packed %s version %016llx: %zu shards, %llu samples, %llu bytes into %s\n",
              manifest->dataset_id().c_str(), static_cast<unsigned long long>(manifest->version()),
              manifest->shards().size(), static_cast<unsigned long long>(manifest->num_samples()),
              static_cast<unsigned long long>(manifest->total_bytes()), out_dir.c_str());
  return 0;
}
