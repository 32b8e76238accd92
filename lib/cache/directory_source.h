// DirectorySource: a packed dataset in a plain directory (local, or an NFS
// mount standing in for remote storage), read with pread.
//
// Open() reads the manifest and every shard's header and index, checking
// sizes against the manifest, so a damaged or half-copied directory is
// refused at once with DataLoss. Each sample is checked against its record
// checksum when read; whole shards against the manifest's file checksum.
// Thread-safe: reads share read-only file descriptors.
#ifndef GRADWIRE_LIB_CACHE_DIRECTORY_SOURCE_H_
#define GRADWIRE_LIB_CACHE_DIRECTORY_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gradwire/lib/cache/data_source.h"
#include "gradwire/lib/cache/shard_format.h"

namespace gradwire {
namespace cache {

class DirectorySource : public DataSource {
 public:
  struct Options {
    // Also read every shard in full at Open and check its checksum (what a
    // data server does once at start; slow for a large NFS dataset).
    bool verify_shards = false;
  };

  static absl::StatusOr<std::unique_ptr<DirectorySource>> Open(const std::string& dir,
                                                               const Options& options);
  static absl::StatusOr<std::unique_ptr<DirectorySource>> Open(const std::string& dir) {
    return Open(dir, Options());
  }
  ~DirectorySource() override;

  const Manifest& manifest() const override { return manifest_; }
  absl::StatusOr<Blob> Get(absl::string_view key) override;
  std::string Describe() const override { return "dir:" + dir_; }

 private:
  DirectorySource(std::string dir, Manifest manifest);
  absl::StatusOr<std::string> ReadAt(size_t shard, uint64_t offset, uint64_t length) const;

  const std::string dir_;
  const Manifest manifest_;
  std::vector<int> fds_;                           // one per manifest shard
  std::vector<std::vector<ShardRecord>> records_;  // each shard's index
};

}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_LIB_CACHE_DIRECTORY_SOURCE_H_
