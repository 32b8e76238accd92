#include "gradwire/lib/cache/directory_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/errno_status.h"

namespace gradwire {
namespace cache {

DirectorySource::DirectorySource(std::string dir, Manifest manifest)
    : dir_(std::move(dir)), manifest_(std::move(manifest)) {}

DirectorySource::~DirectorySource() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

absl::StatusOr<std::unique_ptr<DirectorySource>> DirectorySource::Open(const std::string& dir,
                                                                       const Options& options) {
  GRADWIRE_ASSIGN_OR_RETURN(std::string text,
                            ReadWholeFile(absl::StrCat(dir, "/", Manifest::kFileName)));
  absl::StatusOr<Manifest> manifest = Manifest::Parse(text);
  if (!manifest.ok()) {
    return absl::Status(manifest.status().code(),
                        absl::StrCat(dir, ": ", manifest.status().message()));
  }
  std::unique_ptr<DirectorySource> source(new DirectorySource(dir, *std::move(manifest)));
  for (const ShardInfo& shard : source->manifest_.shards()) {
    std::string path = absl::StrCat(dir, "/", shard.name);
    // A FIFO or device named as a shard is refused, not waited on.
    GRADWIRE_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, absl::StrCat("shard ", path)));
    source->fds_.push_back(fd);
    size_t i = source->fds_.size() - 1;
    struct stat st;
    if (fstat(fd, &st) != 0) return ErrnoToStatus(absl::StrCat("stat ", path), errno);
    if (static_cast<uint64_t>(st.st_size) != shard.bytes) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", st.st_size, " bytes, manifest says ", shard.bytes));
    }
    GRADWIRE_ASSIGN_OR_RETURN(std::string head, source->ReadAt(i, 0, kShardHeaderBytes));
    absl::StatusOr<ShardHeader> header = DecodeShardHeader(head);
    if (!header.ok())
      return absl::DataLossError(absl::StrCat(path, ": ", header.status().message()));
    if (header->count != shard.count || header->first_index != shard.first_index) {
      return absl::DataLossError(absl::StrCat(path, ": header disagrees with the manifest"));
    }
    GRADWIRE_ASSIGN_OR_RETURN(std::string index,
                              source->ReadAt(i, kShardHeaderBytes, header->index_bytes()));
    absl::StatusOr<std::vector<ShardRecord>> records =
        DecodeShardIndex(*header, index, shard.bytes);
    if (!records.ok())
      return absl::DataLossError(absl::StrCat(path, ": ", records.status().message()));
    source->records_.push_back(*std::move(records));
    if (options.verify_shards) {
      // In 4 MiB pieces: a shard is checked without holding it whole (a
      // 64 GiB one once ended the process on bad_alloc).
      constexpr uint64_t kPiece = uint64_t{4} << 20;
      Checksum64Stream sum;
      for (uint64_t at = 0; at < shard.bytes; at += kPiece) {
        GRADWIRE_ASSIGN_OR_RETURN(std::string piece,
                                  source->ReadAt(i, at, std::min(kPiece, shard.bytes - at)));
        sum.Update(piece);
      }
      if (sum.Digest() != shard.checksum) {
        return absl::DataLossError(absl::StrCat(path, ": checksum does not match the manifest"));
      }
    }
  }
  return source;
}

absl::StatusOr<std::string> DirectorySource::ReadAt(size_t shard, uint64_t offset,
                                                    uint64_t length) const {
  std::string out(length, '\0');
  GRADWIRE_RETURN_IF_ERROR(ReadFileAt(fds_[shard], offset, out.size(), &out[0],
                                      absl::StrCat(dir_, "/", manifest_.shards()[shard].name)));
  return out;
}

absl::StatusOr<Blob> DirectorySource::Get(absl::string_view key) {
  if (key.find('/') == absl::string_view::npos) {
    const ShardInfo* shard = manifest_.FindShard(key);
    if (shard == nullptr) {
      return absl::NotFoundError(absl::StrCat("no shard or sample '", key, "' in ", Describe()));
    }
    size_t i = static_cast<size_t>(shard - manifest_.shards().data());
    GRADWIRE_ASSIGN_OR_RETURN(std::string bytes, ReadAt(i, 0, shard->bytes));
    if (Checksum64(bytes) != shard->checksum) {
      return absl::DataLossError(absl::StrCat(dir_, "/", shard->name, ": checksum mismatch"));
    }
    return MakeBlob(std::move(bytes));
  }
  GRADWIRE_ASSIGN_OR_RETURN(SampleLocation at, manifest_.LocateSample(key));
  const ShardRecord& record = records_[at.shard][at.record];
  GRADWIRE_ASSIGN_OR_RETURN(std::string bytes, ReadAt(at.shard, record.offset, record.length));
  if (Checksum64(bytes) != record.checksum) {
    return absl::DataLossError(absl::StrCat(dir_, "/", manifest_.shards()[at.shard].name,
                                            ": sample ", key, " fails its checksum"));
  }
  return MakeBlob(std::move(bytes));
}

}  // namespace cache
}  // namespace gradwire
