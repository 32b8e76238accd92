// What compression to apply, parsed from a spec string or from flags.
//
// Spec strings name a method and optional settings:
//   "none", "fp16", "bf16", "topk:ratio=0.01", "approx_topk:ratio=0.001",
//   "randomk:ratio=0.01,seed=7", "qsgd:bits=4,bucket=512", "sign:bucket=1024",
//   "topk:ratio=0.01,values=fp16,indices=varint,ef=off"
// The same settings exist as flags in tools/ (--compression,
// --compression_ratio, --quant_bits, --bucket_size, --error_feedback,
// --seed); lib/ defines no flags, tools/ fill a CompressionSpec and call
// Validate(). Errors name the setting (as its flag) and the allowed range.
//
// Each method reads some settings only (SettingsOf). Parse refuses a
// setting the method does not read ("sign:ratio=0.01": sign keeps no
// ratio; "topk:ratio=0.01,bits=4": top-k does not quantize), except in the
// canonical string (ToString: Communicator's spec, a checkpoint's), which
// names every setting by design.
#ifndef GRADWIRE_LIB_CODEC_COMPRESSION_SPEC_H_
#define GRADWIRE_LIB_CODEC_COMPRESSION_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {

enum class Method { kNone, kFp16, kBf16, kTopK, kApproxTopK, kRandomK, kQsgd, kSign };

struct CompressionSpec {
  Method method = Method::kNone;
  double ratio = 0.01;         // density k/n for sparse methods, in (0, 1]
  int quant_bits = 4;          // qsgd: 1..8
  uint32_t bucket_size = 512;  // qsgd, sign: elements per fp32 scale, >= 1
  // Unset means the method's default: on for lossy methods, off otherwise.
  enum class ErrorFeedback { kDefault, kOn, kOff } error_feedback = ErrorFeedback::kDefault;
  uint64_t seed = 0;                    // shared by all ranks (random-k, stochastic rounding)
  ValueType values = ValueType::kFp32;  // sparse methods: fp32/fp16/bf16
  // Top-k methods: varint (default: sorted indices as delta varints, about
  // 1.1-1.7 bytes each at 0.1-1 % density instead of 4; lossless, and
  // the saving is what a 1-10 Gbit/s link notices) or raw (u32, cheapest
  // to decode: for links fast enough that decode time matters more).
  IndexEncoding indices = IndexEncoding::kDeltaVarint;

  // Parses the spec grammar above. Unknown methods or keys, and values out
  // of range, are InvalidArgument naming the key, its flag and the range;
  // a setting the method does not read is InvalidArgument naming the ones
  // it does.
  static absl::StatusOr<CompressionSpec> Parse(absl::string_view text);

  // Checks every field against its allowed range (used after flags).
  absl::Status Validate() const;

  // Whether error feedback applies, resolving kDefault.
  bool UsesErrorFeedback() const;

  // The spec rank `rank` encodes with. All ranks agree on one spec, but
  // QSGD's stochastic rounding must be independent across ranks or its
  // noise does not average out in the mean (every rank would round the
  // same elements the same way), so its seed is mixed with the rank.
  // Receivers never need that seed. Every other method is unchanged:
  // random-k's indices must come from the shared seed.
  CompressionSpec ForSender(int rank) const;

  // Canonical spec string; Parse(ToString()) returns an equal spec.
  std::string ToString() const;

  // k, the values a sparse method sends for n elements:
  // max(1, round(ratio * n)), at most n; 0 when n is 0. Sender and
  // receiver both compute it, so a frame with another k is refused.
  uint64_t SelectedCount(uint64_t n) const;

  // Whether the method sends selected entries (topk, approx_topk,
  // randomk: the sparse methods) rather than every element.
  bool SelectsEntries() const {
    return method == Method::kTopK || method == Method::kApproxTopK || method == Method::kRandomK;
  }
  // Whether the method casts every element to 16 bits (fp16, bf16): the
  // methods the cast allreduce (lib/comm/cast_allreduce.h) serves.
  bool CastsTo16Bits() const { return method == Method::kFp16 || method == Method::kBf16; }
};

absl::string_view MethodName(Method method);

// The spec keys (ratio, bits, bucket, ef, seed, values, indices) whose
// settings `method`'s codec reads.
std::vector<std::string> SettingsOf(Method method);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_COMPRESSION_SPEC_H_
