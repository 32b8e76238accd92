// Writes a few valid frames, one per codec shape, as the fuzzer's starting
// corpus: generated rather than checked in so they follow the format when
// it changes. Usage: make_seeds OUTPUT_DIR
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gradwire/lib/codec/wire_format.h"

namespace {

using gradwire::CodecId;
using gradwire::FrameHeader;
using gradwire::IndexEncoding;
using gradwire::ValueType;

// Builds a frame whose indices section holds `indices` (encoded as the
// header says) and whose scales/values sections hold a byte pattern.
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
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(frame.data(), 1, frame.size(), f) == frame.size();
  return std::fclose(f) == 0 && ok;
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
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
  return 0;
}
