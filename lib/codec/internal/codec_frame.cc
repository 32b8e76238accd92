#include "gradwire/lib/codec/internal/codec_frame.h"

#include "absl/strings/str_cat.h"
#include "gradwire/lib/codec/codec.h"

namespace gradwire {
namespace codec_internal {

kernels::ValueFormat ToFormat(ValueType type) {
  switch (type) {
    case ValueType::kFp16:
      return kernels::ValueFormat::kFp16;
    case ValueType::kBf16:
      return kernels::ValueFormat::kBf16;
    default:
      return kernels::ValueFormat::kFp32;
  }
}

CodecId CodecIdFor(Method method) {
  // In Method's order.
  static constexpr CodecId kIds[] = {CodecId::kDense, CodecId::kFp16,       CodecId::kBf16,
                                     CodecId::kTopK,  CodecId::kApproxTopK, CodecId::kRandomK,
                                     CodecId::kQsgd,  CodecId::kSign};
  static_assert(sizeof(kIds) / sizeof(kIds[0]) == static_cast<size_t>(Method::kSign) + 1);
  return kIds[static_cast<size_t>(method)];
}

absl::Status CheckEncodeArgs(absl::Span<const float> grad, absl::Span<float> residual,
                             size_t out_bytes, uint64_t max_bytes) {
  if (grad.size() > kMaxDenseLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient of ", grad.size(), " elements exceeds the 2^32 a frame can index"));
  }
  if (!residual.empty() && residual.size() != grad.size()) {
    return absl::InvalidArgumentError(absl::StrCat("residual has ", residual.size(),
                                                   " elements but the gradient has ", grad.size()));
  }
  if (out_bytes < max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("output buffer of ", out_bytes,
                                                   " bytes is smaller than MaxEncodedBytes(",
                                                   grad.size(), ") = ", max_bytes));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<EncodeStats> WithStats(absl::StatusOr<size_t> bytes,
                                      const kernels::FusedStats& counts) {
  if (!bytes.ok()) return bytes.status();
  EncodeStats stats;
  stats.frame_bytes = *bytes;
  stats.selected = counts.selected;
  stats.nonfinite = counts.nonfinite;
  return stats;
}

}  // namespace

absl::StatusOr<EncodeStats> SealWithStats(absl::Span<uint8_t> out,
                                          const kernels::FusedStats& counts) {
  if (counts.nonfinite > 0) MarkFrameNonFinite(out);
  return WithStats(SealFrame(out), counts);
}

absl::StatusOr<EncodeStats> SealWithStats(absl::Span<uint8_t> out, const StreamingChecksum64& sum,
                                          const kernels::FusedStats& counts) {
  if (counts.nonfinite > 0) {
    // The streaming sum saw the header unmarked: checksum the frame again
    // (a non-finite step is rare).
    MarkFrameNonFinite(out);
    return WithStats(SealFrame(out), counts);
  }
  return WithStats(SealFrame(out, sum), counts);
}

absl::StatusOr<ParsedFrame> ParseFrameFor(absl::Span<const uint8_t> frame, CodecId codec,
                                          uint64_t dense_length, FrameIntegrity integrity) {
  FrameLimits limits;
  limits.max_dense_length = dense_length;
  limits.integrity = integrity;
  // Widest element: a 5-byte varint index and a 4-byte value (a 1-element
  // QSGD bucket needs 4 + 1).
  limits.max_frame_bytes = kFrameHeaderBytes + kFrameChecksumBytes + 9 * dense_length;
  absl::StatusOr<ParsedFrame> parsed = ParseFrame(frame, limits);
  if (!parsed.ok()) return parsed.status();
  const FrameHeader& h = parsed->header;
  if (h.codec != codec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame was encoded by codec id ", static_cast<int>(h.codec), " but this codec is id ",
        static_cast<int>(codec), " (sender and receiver specs differ)"));
  }
  if (h.dense_length != dense_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame describes ", h.dense_length, " elements but the dense buffer has ", dense_length));
  }
  return parsed;
}

absl::Status FieldMismatch(absl::string_view codec, absl::string_view field, uint64_t got,
                           uint64_t want, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(codec, " frame: ", field, " is ", got, ", expected ", want, " (", why, ")"));
}

absl::Status CheckFields(absl::string_view codec, std::initializer_list<ExpectedField> fields) {
  for (const ExpectedField& f : fields) {
    if (f.got != f.want) return FieldMismatch(codec, f.field, f.got, f.want, f.why);
  }
  return absl::OkStatus();
}

}  // namespace codec_internal
}  // namespace gradwire
