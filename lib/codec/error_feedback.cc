#include "gradwire/lib/codec/error_feedback.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace {

// State layout (base/envelope.h, all little endian):
//   "GWEF" | u32 version | body | u64 XXH3-64 of everything before it
//   body = u32 spec_len | spec (CompressionSpec::ToString) | u64 count
//          | count * (u32 key_len | key | u64 n | n * f32)
constexpr char kStateMagic[] = "GWEF";
constexpr uint32_t kStateVersion = 1;
constexpr char kWhat[] = "error-feedback state";

}  // namespace

absl::StatusOr<EncodeStats> ErrorFeedback::Encode(absl::string_view key,
                                                  absl::Span<const float> grad, uint64_t step,
                                                  absl::Span<uint8_t> out) {
  if (!codec_.spec().UsesErrorFeedback()) return codec_.Encode(grad, step, {}, out, &scratch_);
  auto it = residuals_.find(key);
  if (it == residuals_.end()) {
    // Check the call first so a refused one does not leave a residual behind.
    if (out.size() < codec_.MaxEncodedBytes(grad.size())) {
      return codec_.Encode(grad, step, {}, out);  // reports the size error
    }
    it = residuals_.emplace(std::string(key), std::vector<float>(grad.size(), 0.0f)).first;
  } else if (it->second.size() != grad.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient buffer \"", key, "\" has ",
                                                   grad.size(), " elements, but its residual has ",
                                                   it->second.size()));
  }
  return codec_.Encode(grad, step, absl::MakeSpan(it->second), out, &scratch_);
}

absl::Span<const float> ErrorFeedback::Residual(absl::string_view key) const {
  auto it = residuals_.find(key);
  if (it == residuals_.end()) return {};
  return it->second;
}

absl::Status ErrorFeedback::GiveBack(absl::string_view key, absl::Span<const uint32_t> indices,
                                     absl::Span<const float> values) {
  if (!codec_.spec().UsesErrorFeedback()) return absl::OkStatus();
  auto it = residuals_.find(key);
  if (it == residuals_.end() || indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "giving back ", values.size(), " values at ", indices.size(), " indices to \"", key,
        "\", which ", it == residuals_.end() ? "has no residual" : "needs one index per value"));
  }
  std::vector<float>& residual = it->second;
  for (uint32_t i : indices) {
    if (i >= residual.size()) {
      return absl::InvalidArgumentError(absl::StrCat("giving back index ", i, " to \"", key,
                                                     "\", whose residual has ", residual.size(),
                                                     " elements"));
    }
  }
  for (size_t j = 0; j < indices.size(); ++j) {
    residual[indices[j]] = kernels::ResidualAfter(residual[indices[j]], -values[j]);
  }
  return absl::OkStatus();
}

std::string ErrorFeedback::SaveState() const {
  std::string out = StartEnvelope(kStateMagic, kStateVersion);
  PutLengthPrefixed32(&out, codec_.spec().ToString());
  PutFixed64(&out, residuals_.size());
  for (const auto& [key, values] : residuals_) {
    PutLengthPrefixed32(&out, key);
    PutFixed64(&out, values.size());
    const size_t at = out.size();
    out.resize(at + 4 * values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      EncodeFixed32(&out[at + 4 * i], bits);
    }
  }
  SealEnvelope(&out);
  return out;
}

absl::Status ErrorFeedback::RestoreState(absl::string_view state) {
  GRADWIRE_ASSIGN_OR_RETURN(const Envelope envelope,
                            OpenEnvelope(state, kStateMagic, kStateVersion, kStateVersion, kWhat));
  ByteReader r(envelope.body, kWhat);
  absl::string_view spec;
  GRADWIRE_RETURN_IF_ERROR(r.ReadLengthPrefixed32("spec", &spec));
  const std::string mine = codec_.spec().ToString();
  if (spec != mine) {
    return absl::InvalidArgumentError(absl::StrCat("error-feedback state was saved for codec \"",
                                                   spec, "\" but this one is \"", mine, "\""));
  }
  uint64_t count = 0;
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed64("key count", &count));
  std::map<std::string, std::vector<float>, std::less<>> restored;
  for (uint64_t e = 0; e < count; ++e) {
    absl::string_view key, raw;
    uint64_t n = 0;
    GRADWIRE_RETURN_IF_ERROR(r.ReadLengthPrefixed32("key", &key));
    GRADWIRE_RETURN_IF_ERROR(r.ReadFixed64("residual length", &n));
    if (n > r.remaining() / 4) {
      return r.Error(absl::StrCat("residual \"", key, "\" claims ", n, " elements but only ",
                                  r.remaining(), " bytes remain"));
    }
    GRADWIRE_RETURN_IF_ERROR(r.ReadBytes("residual", n * 4, &raw));
    auto existing = residuals_.find(key);
    if (existing != residuals_.end() && existing->second.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("error-feedback state: residual \"", key, "\" has ", n,
                       " elements but this model's has ", existing->second.size()));
    }
    std::vector<float> values(n);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t bits = DecodeFixed32(raw.data() + 4 * i);
      std::memcpy(&values[i], &bits, 4);
    }
    if (!restored.emplace(std::string(key), std::move(values)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("error-feedback state: key \"", key, "\" appears twice"));
    }
  }
  GRADWIRE_RETURN_IF_ERROR(r.ExpectDone());
  residuals_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace gradwire
