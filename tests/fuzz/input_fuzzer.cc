// libFuzzer target for the parsers of outside bytes other than the codec
// frame (wire_format_fuzzer.cc has that one): a peer's region frames (the
// sparse and cast allreduces), a user's compression spec, and the data
// cache's files and tokens (disk entry heads, shard headers and indices,
// manifests). The first input byte picks the parser, the rest is its
// input. Beyond "no crash, no sanitizer report", each checks what its
// parser promises and traps where that fails:
//   * region frame: accepted entries are strictly increasing and inside
//     the region, no more than the receiver allows, and the sections'
//     sizes add up to the frame; the writer, handed the parsed entries,
//     writes the same bytes whenever it picks the same layout;
//   * compression spec: an accepted spec validates, and its canonical
//     string parses back to itself;
//   * disk entry head: an accepted head promises exactly the file's size;
//     with a matching value checksum, EncodeEntryHead rebuilds it;
//   * shard: an accepted index's records lie after the index and inside
//     the file; EncodeShard of the records rebuilds a file that decodes to
//     the same header;
//   * manifest: an accepted manifest serializes to text that parses to the
//     same manifest, and every shard's first and last sample locate to it;
//   * token: NormalizeToken is idempotent and returns printable ASCII.
// Inputs whose checksums would stop every mutation (entry heads, shard
// indices) are also tried resealed, as the wire-format fuzzer does.
// Build and run: tools/fuzz.sh SECONDS.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/disk_entry.h"
#include "gradwire/lib/cache/manifest.h"
#include "gradwire/lib/cache/shard_format.h"
#include "gradwire/lib/cache/token.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/comm/region_frame.h"

namespace {

using gradwire::RegionExpectation;
using gradwire::RegionFrameKind;
using gradwire::RegionLayout;
using gradwire::ValueType;

// The parsers, by the input's first byte (modulo their number).
enum Target : uint8_t { kRegion, kSpec, kEntry, kShard, kManifest, kToken, kTargets };

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

absl::string_view Text(absl::Span<const uint8_t> in) {
  return absl::string_view(reinterpret_cast<const char*>(in.data()), in.size());
}

// A region frame, with the receiver's expectation taken from the frame's
// own header where it can be (so that mutations reach the body checks)
// and from `control` where the receiver has a choice: which sparse layout
// it allows, whether a failure notice may come, and how many entries it
// accepts at most.
void FuzzRegion(uint8_t control, absl::Span<const uint8_t> frame) {
  RegionExpectation want;
  if (frame.size() >= gradwire::kRegionHeaderBytes) {
    const uint8_t* p = frame.data();
    want.kind = p[5] == 2 ? RegionFrameKind::kSurvivors : RegionFrameKind::kContribution;
    want.value_type = p[6] <= 2 ? static_cast<ValueType>(p[6]) : ValueType::kFp32;
    want.region = gradwire::DecodeFixed32(p + 8);
    want.begin = gradwire::DecodeFixed32(p + 16);
    want.length = gradwire::DecodeFixed32(p + 20);
    // At most 2^16 values are implied, as a receiver sizes its buffers.
    want.implied_count = gradwire::DecodeFixed32(p + 24) & 0xffff;
  }
  static constexpr RegionLayout kSparse[] = {RegionLayout::kDeltaVarint, RegionLayout::kRawU32,
                                             RegionLayout::kImplied};
  want.sparse = kSparse[(control & 3) % 3];
  want.failure_allowed = (control & 4) != 0;
  want.max_count = (control >> 3) == 31 ? want.length : (control >> 3) * 97u;

  std::vector<uint32_t> indices;
  auto view = gradwire::ParseRegionFrame(frame, want, &indices);
  if (!view.ok()) return;
  const gradwire::RegionFrameHeader& h = view->header;
  if (h.kind == RegionFrameKind::kFailure) {
    Check(want.failure_allowed && h.status != 0 && frame.size() == gradwire::kRegionHeaderBytes);
    return;
  }
  const uint64_t width = gradwire::ValueBytes(h.value_type);
  Check(view->values.size() == h.count * width);
  Check(frame.size() == gradwire::kRegionHeaderBytes + h.index_bytes + view->values.size());
  const bool listed = h.layout == RegionLayout::kRawU32 || h.layout == RegionLayout::kDeltaVarint;
  if (listed) {
    Check(indices.size() == h.count && h.count <= want.max_count && h.count <= h.length);
    for (size_t i = 0; i < indices.size(); ++i) {
      Check(indices[i] < h.length && (i == 0 || indices[i] > indices[i - 1]));
    }
  }
  if (h.layout == RegionLayout::kDense) Check(h.count == h.length && h.index_bytes == 0);
  if (h.layout == RegionLayout::kImplied) Check(h.count == want.implied_count);

  // The writer's round trip. A dense frame's entries are all its elements.
  if (h.layout == RegionLayout::kDense) {
    indices.resize(h.count);
    for (uint64_t i = 0; i < h.count; ++i) indices[i] = static_cast<uint32_t>(i);
  }
  gradwire::RegionEntries entries;
  entries.indices = indices.data();
  entries.values = view->values.data();
  entries.count = h.count;
  std::vector<uint8_t> again(
      gradwire::MaxRegionFrameBytes(want.sparse, h.value_type, h.length, h.count));
  auto written = gradwire::WriteRegionFrame(h, want.sparse, entries, absl::MakeSpan(again));
  Check(written.ok());
  // The writer picks the smaller layout; a sender may have picked the
  // other one, which the parser accepts too.
  const bool same_layout = again.size() >= gradwire::kRegionHeaderBytes && again[7] == frame[7];
  if (same_layout) {
    Check(*written == frame.size() && std::memcmp(again.data(), frame.data(), frame.size()) == 0);
  }
}

void FuzzSpec(absl::Span<const uint8_t> in) {
  auto spec = gradwire::CompressionSpec::Parse(Text(in));
  if (!spec.ok()) return;
  Check(spec->Validate().ok());
  const std::string canonical = spec->ToString();
  auto again = gradwire::CompressionSpec::Parse(canonical);
  Check(again.ok() && again->ToString() == canonical);
}

// The input as a whole entry file.
void FuzzEntry(absl::string_view file) {
  auto h = gradwire::cache::ParseEntryHead(file, file.size());
  if (!h.ok()) return;
  Check(h->key.size() <= gradwire::cache::kMaxEntryKeyBytes);
  Check(h->file_bytes() == file.size());
  const absl::string_view value = file.substr(h->value_offset());
  if (gradwire::cache::Checksum64(value) == h->value_checksum) {
    const std::string head = gradwire::cache::EncodeEntryHead(h->key, h->version, value);
    Check(head.size() == h->value_offset() && file.substr(0, head.size()) == head);
  }
}

// The entry file with its value checksum and header checksum recomputed
// (bytes 32..47), for inputs long enough to hold the key they declare.
void FuzzEntryResealed(absl::string_view file) {
  constexpr size_t kHead = gradwire::cache::kEntryHeaderBytes;
  if (file.size() < kHead) return;
  std::string fixed(file);
  const uint32_t key_length = gradwire::DecodeFixed32(fixed.data() + 8);
  if (key_length > fixed.size() - kHead) return;
  const absl::string_view key(fixed.data() + kHead, key_length);
  const absl::string_view value(fixed.data() + kHead + key_length,
                                fixed.size() - kHead - key_length);
  gradwire::EncodeFixed64(&fixed[32], gradwire::cache::Checksum64(value));
  gradwire::cache::Checksum64Stream sum;
  sum.Update(absl::string_view(fixed.data(), 40));
  sum.Update(key);
  gradwire::EncodeFixed64(&fixed[40], sum.Digest());
  FuzzEntry(fixed);
}

// The input as a whole shard file.
void FuzzShard(absl::string_view file) {
  using gradwire::cache::kShardHeaderBytes;
  auto h = gradwire::cache::DecodeShardHeader(file);
  if (!h.ok()) return;
  if (file.size() - kShardHeaderBytes < h->index_bytes()) return;  // a reader stops here
  auto records = gradwire::cache::DecodeShardIndex(
      *h, file.substr(kShardHeaderBytes, h->index_bytes()), file.size());
  if (!records.ok()) return;
  Check(records->size() == h->count);
  std::vector<std::string> values;
  for (const gradwire::cache::ShardRecord& r : *records) {
    Check(r.offset >= kShardHeaderBytes + h->index_bytes() && r.offset <= file.size() &&
          r.length <= file.size() - r.offset);
    values.emplace_back(file.substr(r.offset, r.length));
  }
  const std::string rebuilt = gradwire::cache::EncodeShard(h->first_index, values);
  auto again = gradwire::cache::DecodeShardHeader(rebuilt);
  Check(again.ok() && again->count == h->count && again->first_index == h->first_index);
  auto again_records = gradwire::cache::DecodeShardIndex(
      *again, absl::string_view(rebuilt).substr(kShardHeaderBytes, again->index_bytes()),
      rebuilt.size());
  Check(again_records.ok() && again_records->size() == values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const gradwire::cache::ShardRecord& r = (*again_records)[i];
    Check(absl::string_view(rebuilt).substr(r.offset, r.length) == values[i]);
  }
}

// The shard file with its index checksum recomputed (bytes 24..31) over
// the index its header declares, where the file holds it.
void FuzzShardResealed(absl::string_view file) {
  using gradwire::cache::kShardHeaderBytes;
  if (file.size() < kShardHeaderBytes) return;
  std::string fixed(file);
  const uint64_t index_bytes =
      uint64_t{gradwire::DecodeFixed32(fixed.data() + 12)} * gradwire::cache::kShardIndexEntryBytes;
  if (index_bytes > fixed.size() - kShardHeaderBytes) return;
  gradwire::EncodeFixed64(&fixed[24], gradwire::cache::Checksum64(absl::string_view(fixed).substr(
                                          kShardHeaderBytes, index_bytes)));
  FuzzShard(fixed);
}

void FuzzManifest(absl::string_view text) {
  auto m = gradwire::cache::Manifest::Parse(text);
  if (!m.ok()) return;
  const std::string serialized = m->Serialize();
  auto again = gradwire::cache::Manifest::Parse(serialized);
  Check(again.ok() && again->version() == m->version() && again->Serialize() == serialized);
  for (size_t i = 0; i < m->shards().size(); ++i) {
    const gradwire::cache::ShardInfo& s = m->shards()[i];
    if (s.count == 0) continue;
    for (uint64_t record : {uint64_t{0}, s.count - 1}) {
      auto at =
          m->LocateSample(gradwire::cache::Manifest::SampleKey(s.split, s.first_index + record));
      Check(at.ok() && at->shard == i && at->record == record);
    }
  }
}

// A manifest rebuilt with the version its content has, so that mutations
// of the shard lines get past the version check: the input's lines with
// the third replaced.
void FuzzManifestResealed(absl::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size() && lines.size() < 4096) {
    const size_t end = text.find('\n', start);
    lines.emplace_back(text.substr(start, end == absl::string_view::npos ? end : end - start));
    if (end == absl::string_view::npos) break;
    start = end + 1;
  }
  if (lines.size() < 3) return;
  // The version is the checksum of the body: every line but the first
  // and third, each ending in a newline (Manifest::Body).
  std::string body = lines[1] + "\n";
  for (size_t i = 3; i < lines.size(); ++i) {
    if (!lines[i].empty()) absl::StrAppend(&body, lines[i], "\n");
  }
  lines[2] = "version " + gradwire::cache::ChecksumToHex(gradwire::cache::Checksum64(body));
  std::string fixed;
  for (const std::string& line : lines) absl::StrAppend(&fixed, line, "\n");
  FuzzManifest(fixed);
}

void FuzzToken(absl::string_view raw) {
  auto token = gradwire::cache::NormalizeToken(raw);
  if (!token.ok()) return;
  Check(!token->empty() && token->size() <= gradwire::cache::kMaxTokenBytes);
  for (char c : *token) Check(c >= 0x21 && c <= 0x7e);
  auto again = gradwire::cache::NormalizeToken(*token);
  Check(again.ok() && *again == *token);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::Span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % kTargets) {
    case kRegion:
      if (!in.empty()) FuzzRegion(in[0], in.subspan(1));
      break;
    case kSpec:
      FuzzSpec(in);
      break;
    case kEntry:
      FuzzEntry(Text(in));
      FuzzEntryResealed(Text(in));
      break;
    case kShard:
      FuzzShard(Text(in));
      FuzzShardResealed(Text(in));
      break;
    case kManifest:
      FuzzManifest(Text(in));
      FuzzManifestResealed(Text(in));
      break;
    case kToken:
      FuzzToken(Text(in));
      break;
  }
  return 0;
}
