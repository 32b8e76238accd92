// Writes the fuzzers' starting corpora: a few valid frames, one per codec
// shape, for wire_format_fuzzer; and for input_fuzzer, valid inputs of
// each parser it drives (region frames of every layout, specs, a disk
// entry, a shard, a manifest, a token), each behind its selector byte.
// Generated rather than checked in so they follow the formats when they
// change. Usage: make_seeds WIRE_DIR [INPUT_DIR]
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gradwire/lib/cache/disk_entry.h"
#include "gradwire/lib/cache/manifest.h"
#include "gradwire/lib/cache/shard_format.h"
#include "gradwire/lib/codec/wire_format.h"
#include "gradwire/lib/comm/region_frame.h"

namespace {

using gradwire::CodecId;
using gradwire::FrameHeader;
using gradwire::IndexEncoding;
using gradwire::ValueType;

// Builds a frame whose indices section holds `indices` (encoded as the
// header says) and whose scales/values sections hold a byte pattern.
bool WriteFile(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

bool Write(const std::string& dir, const char* name, FrameHeader h,
           const std::vector<uint32_t>& indices, uint64_t scale_bytes, uint64_t value_bytes) {
  std::vector<uint8_t> encoded(gradwire::MaxIndexBytes(h.index_encoding, indices.size()));
  auto n = gradwire::EncodeIndices(h.index_encoding, indices, absl::MakeSpan(encoded));
  if (!n.ok()) return false;
  h.element_count = h.element_count ? h.element_count : indices.size();
  h.index_bytes = *n;
  h.scale_bytes = scale_bytes;
  h.value_bytes = value_bytes;
  std::vector<uint8_t> frame(gradwire::FrameBytes(h));
  auto sections = gradwire::StartFrame(h, absl::MakeSpan(frame));
  if (!sections.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, sections.status().ToString().c_str());
    return false;
  }
  for (size_t i = 0; i < *n; ++i) sections->indices[i] = encoded[i];
  for (size_t i = 0; i < sections->scales.size(); ++i) sections->scales[i] = 0x3f;
  for (size_t i = 0; i < sections->values.size(); ++i) sections->values[i] = i * 37;
  if (!gradwire::SealFrame(absl::MakeSpan(frame)).ok()) return false;
  return WriteFile(dir + "/" + name, frame.data(), frame.size());
}

FrameHeader Header(CodecId codec, ValueType type, IndexEncoding enc, uint64_t n) {
  FrameHeader h;
  h.codec = codec;
  h.value_type = type;
  h.index_encoding = enc;
  h.dense_length = n;
  h.step = 17;
  h.seed = 99;
  return h;
}

// input_fuzzer's selector bytes (its Target enum).
enum InputTarget : uint8_t { kRegion, kSpec, kEntry, kShard, kManifest, kToken };

bool WriteInput(const std::string& dir, const char* name, InputTarget target,
                const std::string& bytes) {
  const std::string input = std::string(1, static_cast<char>(target)) + bytes;
  return WriteFile(dir + "/" + name, input.data(), input.size());
}

// A region frame of `layout` holding `indices` (relative to the region)
// with fp32 values, behind the control byte that makes input_fuzzer expect
// `layout` as the sparse one and accept up to the region's length.
bool WriteRegion(const std::string& dir, const char* name, gradwire::RegionLayout sparse,
                 gradwire::RegionFrameKind kind, uint64_t length,
                 const std::vector<uint32_t>& indices) {
  gradwire::RegionFrameHeader h;
  h.kind = kind;
  h.region = 2;
  h.begin = 1000;
  h.length = length;
  std::vector<uint8_t> values(4 * indices.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 29 + 1);
  gradwire::RegionEntries entries;
  entries.indices = indices.data();
  entries.values = values.data();
  entries.count = indices.size();
  std::vector<uint8_t> frame(
      gradwire::MaxRegionFrameBytes(sparse, h.value_type, length, indices.size()));
  auto n = gradwire::WriteRegionFrame(h, sparse, entries, absl::MakeSpan(frame));
  if (!n.ok()) return false;
  const uint8_t layout_bits = sparse == gradwire::RegionLayout::kRawU32    ? 1
                              : sparse == gradwire::RegionLayout::kImplied ? 2
                                                                           : 0;
  const uint8_t control = static_cast<uint8_t>(31 << 3 | layout_bits);
  std::string bytes(1, static_cast<char>(control));
  bytes.append(reinterpret_cast<const char*>(frame.data()), *n);
  return WriteInput(dir, name, kRegion, bytes);
}

bool WriteInputSeeds(const std::string& dir) {
  using gradwire::RegionFrameKind;
  using gradwire::RegionLayout;
  bool ok = true;
  ok &= WriteRegion(dir, "region_varint", RegionLayout::kDeltaVarint,
                    RegionFrameKind::kContribution, 5000, {0, 7, 300, 4999});
  ok &= WriteRegion(dir, "region_raw", RegionLayout::kRawU32, RegionFrameKind::kSurvivors, 5000,
                    {1, 2, 3});
  ok &= WriteRegion(dir, "region_dense", RegionLayout::kDeltaVarint, RegionFrameKind::kContribution,
                    6, {0, 1, 2, 4, 5});
  ok &= WriteRegion(dir, "region_implied", RegionLayout::kImplied, RegionFrameKind::kContribution,
                    100, {0, 1, 2, 3});
  ok &= WriteRegion(dir, "region_empty", RegionLayout::kDeltaVarint, RegionFrameKind::kSurvivors,
                    100, {});
  const char* specs[] = {"topk:ratio=0.01",
                         "approx_topk:ratio=0.001,values=bf16,indices=raw",
                         "randomk:ratio=0.1,seed=7,ef=off",
                         "qsgd:bits=4,bucket=512",
                         "sign",
                         "fp16",
                         "none"};
  for (const char* spec : specs) {
    ok &= WriteInput(dir, (std::string("spec_") + std::string(spec).substr(0, 4)).c_str(), kSpec,
                     spec);
  }
  const std::string value = "a cached sample's bytes";
  ok &= WriteInput(dir, "entry", kEntry,
                   gradwire::cache::EncodeEntryHead("train/17", 0x1234, value) + value);
  ok &= WriteInput(dir, "shard", kShard,
                   gradwire::cache::EncodeShard(40, {"first", "", "third record"}));
  std::vector<gradwire::cache::ShardInfo> shards(2);
  shards[0] = {"train-00000.gws", "train", 0, 5000, 3925272, 0x89abcdef01234567};
  shards[1] = {"test-00000.gws", "test", 0, 10, 7000, 0x1122334455667788};
  auto manifest = gradwire::cache::Manifest::Create("fashion-mnist", shards);
  ok &= manifest.ok() && WriteInput(dir, "manifest", kManifest, manifest->Serialize());
  ok &= WriteInput(dir, "token", kToken, "  s3cr3t-T0ken_value\n");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s WIRE_DIR [INPUT_DIR]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  ok &= Write(dir, "empty_dense",
              Header(CodecId::kDense, ValueType::kFp32, IndexEncoding::kNone, 0), {}, 0, 0);
  ok &= Write(dir, "dense_fp32", Header(CodecId::kDense, ValueType::kFp32, IndexEncoding::kNone, 4),
              {}, 0, 16);
  ok &= Write(dir, "fp16", Header(CodecId::kFp16, ValueType::kFp16, IndexEncoding::kNone, 5), {}, 0,
              10);
  ok &=
      Write(dir, "topk_raw", Header(CodecId::kTopK, ValueType::kFp32, IndexEncoding::kRawU32, 1000),
            {0, 3, 4, 999}, 0, 16);
  ok &= Write(dir, "topk_varint",
              Header(CodecId::kTopK, ValueType::kBf16, IndexEncoding::kDeltaVarint, 1u << 20),
              {1, 2, 200, 70000, (1u << 20) - 1}, 0, 10);
  ok &= Write(dir, "approx_varint_max",
              Header(CodecId::kApproxTopK, ValueType::kFp16, IndexEncoding::kDeltaVarint,
                     uint64_t{1} << 32),
              {0, 0xffffffffu}, 0, 4);
  FrameHeader randomk = Header(CodecId::kRandomK, ValueType::kFp32, IndexEncoding::kNone, 100);
  randomk.element_count = 3;
  randomk.flags = gradwire::kFlagErrorFeedback;
  ok &= Write(dir, "randomk", randomk, {}, 0, 12);
  FrameHeader qsgd = Header(CodecId::kQsgd, ValueType::kPacked, IndexEncoding::kNone, 10);
  qsgd.quant_bits = 4;
  qsgd.bucket_size = 4;
  qsgd.element_count = 10;
  ok &= Write(dir, "qsgd4", qsgd, {}, 12, 5);
  FrameHeader sign = Header(CodecId::kSign, ValueType::kPacked, IndexEncoding::kNone, 9);
  sign.quant_bits = 1;
  sign.bucket_size = 8;
  sign.element_count = 9;
  ok &= Write(dir, "sign", sign, {}, 8, 2);
  if (!ok) {
    std::fprintf(stderr, "make_seeds: failed to write seeds to %s\n", dir.c_str());
    return 1;
  }
  if (argc == 3 && !WriteInputSeeds(argv[2])) {
    std::fprintf(stderr, "make_seeds: failed to write seeds to %s\n", argv[2]);
    return 1;
  }
  return 0;
}
