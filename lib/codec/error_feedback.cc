#include "gradwire/lib/codec/error_feedback.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
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

ErrorFeedback::~ErrorFeedback() { Clear(); }

void ErrorFeedback::Clear() {
  residuals_.clear();
  for (auto& [key, r] : device_residuals_) {
    // Best effort: a stream that does not finish in time keeps the memory.
    if (r.device->WaitStream(r.stream, absl::Now() + absl::Seconds(60)).ok())
      r.device->Free(r.data);
  }
  device_residuals_.clear();
}

absl::StatusOr<float*> ErrorFeedback::DeviceResidualFor(absl::string_view key, size_t n,
                                                        const DeviceCall& call) {
  kernels::Device& device = call.scratch->device();
  auto it = device_residuals_.find(key);
  if (it != device_residuals_.end()) {
    if (it->second.n != n) {
      return absl::InvalidArgumentError(absl::StrCat("gradient buffer \"", key, "\" has ", n,
                                                     " elements, but its residual has ",
                                                     it->second.n));
    }
    if (it->second.device != &device) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient buffer \"", key, "\" moved to another device"));
    }
    it->second.stream = call.stream;
    return it->second.data;
  }
  auto host = residuals_.find(key);
  if (host != residuals_.end() && host->second.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("gradient buffer \"", key, "\" has ", n,
                                                   " elements, but its residual has ",
                                                   host->second.size()));
  }
  GRADWIRE_ASSIGN_OR_RETURN(void* p, device.Allocate(n * sizeof(float)));
  float* data = static_cast<float*>(p);
  absl::Status s;
  if (host != residuals_.end()) {
    // A restored residual: to the device, waited for (the host copy goes).
    s = device.Copy(data, host->second.data(), n * sizeof(float), kernels::CopyKind::kHostToDevice,
                    call.stream);
    if (s.ok()) s = device.WaitStream(call.stream, absl::Now() + call.timeout);
  } else {
    s = device.FillZero(data, n * sizeof(float), call.stream);
  }
  if (!s.ok()) {
    device.Free(data);
    return s;
  }
  if (host != residuals_.end()) residuals_.erase(host);
  device_residuals_.emplace(std::string(key), DeviceResidual{&device, call.stream, data, n});
  return data;
}

absl::StatusOr<EncodeStats> ErrorFeedback::Encode(absl::string_view key,
                                                  absl::Span<const float> grad, uint64_t step,
                                                  absl::Span<uint8_t> out,
                                                  const DeviceCall* device) {
  if (!codec_.spec().UsesErrorFeedback()) {
    return codec_.Encode(grad, step, {}, out, &scratch_, device);
  }
  kernels::Location where;
  GRADWIRE_RETURN_IF_ERROR(kernels::Locate(grad.data(), &where));
  if (where == kernels::Location::kDevice) {
    if (device == nullptr || device->scratch == nullptr) {
      return codec_.Encode(grad, step, {}, out, &scratch_, nullptr);  // reports the error
    }
    if (out.size() < codec_.MaxEncodedBytes(grad.size())) {
      return codec_.Encode(grad, step, {}, out, &scratch_, device);  // reports the size error
    }
    GRADWIRE_ASSIGN_OR_RETURN(float* residual, DeviceResidualFor(key, grad.size(), *device));
    return codec_.Encode(grad, step, absl::MakeSpan(residual, grad.size()), out, &scratch_, device);
  }
  if (device_residuals_.count(key) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient buffer \"", key, "\" is host memory, but its residual is on the device"));
  }
  auto it = residuals_.find(key);
  if (it == residuals_.end()) {
    // Check the call first so a refused one does not leave a residual behind.
    if (out.size() < codec_.MaxEncodedBytes(grad.size())) {
      return codec_.Encode(grad, step, {}, out);  // reports the size error
    }
    it = residuals_.emplace(std::string(key), HugePageVector<float>(grad.size(), 0.0f)).first;
  } else if (it->second.size() != grad.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient buffer \"", key, "\" has ",
                                                   grad.size(), " elements, but its residual has ",
                                                   it->second.size()));
  }
  return codec_.Encode(grad, step, absl::MakeSpan(it->second), out, &scratch_);
}

absl::Span<const float> ErrorFeedback::Residual(absl::string_view key) const {
  auto d = device_residuals_.find(key);
  if (d != device_residuals_.end()) return absl::MakeConstSpan(d->second.data, d->second.n);
  auto it = residuals_.find(key);
  if (it == residuals_.end()) return {};
  return it->second;
}

absl::Span<float> ErrorFeedback::MutableHostResidual(absl::string_view key) {
  auto it = residuals_.find(key);
  if (it == residuals_.end()) return {};
  return absl::MakeSpan(it->second);
}

absl::Status ErrorFeedback::GiveBack(absl::string_view key, absl::Span<const uint32_t> indices,
                                     absl::Span<const float> values) {
  if (!codec_.spec().UsesErrorFeedback()) return absl::OkStatus();
  if (device_residuals_.count(key) > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("giving back to \"", key, "\": its residual is on the device"));
  }
  auto it = residuals_.find(key);
  if (it == residuals_.end() || indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "giving back ", values.size(), " values at ", indices.size(), " indices to \"", key,
        "\", which ", it == residuals_.end() ? "has no residual" : "needs one index per value"));
  }
  HugePageVector<float>& residual = it->second;
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

absl::Status ErrorFeedback::DivideAll(float divisor) {
  if (!(divisor > 0.0f) || !(divisor <= std::numeric_limits<float>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("dividing the residuals: divisor must be positive and finite, got ", divisor));
  }
  for (auto& [key, values] : residuals_) {
    GRADWIRE_RETURN_IF_ERROR(kernels::DivideAll(values.data(), values.size(), divisor));
  }
  for (auto& [key, r] : device_residuals_) {
    GRADWIRE_RETURN_IF_ERROR(kernels::DivideAll(r.data, r.n, divisor, r.stream));
  }
  return absl::OkStatus();
}

std::string ErrorFeedback::SaveState() const {
  absl::StatusOr<std::string> state = Save();
  return state.ok() ? *std::move(state) : std::string();
}

absl::StatusOr<std::string> ErrorFeedback::Save(absl::Duration timeout) const {
  // Every key in order, device residuals copied through the host.
  std::map<absl::string_view, absl::Span<const float>> all;
  for (const auto& [key, values] : residuals_) all[key] = values;
  std::vector<std::vector<float>> copies;
  copies.reserve(device_residuals_.size());
  for (const auto& [key, r] : device_residuals_) {
    copies.emplace_back(r.n);
    GRADWIRE_RETURN_IF_ERROR(r.device->Copy(copies.back().data(), r.data, r.n * sizeof(float),
                                            kernels::CopyKind::kDeviceToHost, r.stream));
    GRADWIRE_RETURN_IF_ERROR(r.device->WaitStream(r.stream, absl::Now() + timeout));
    all[key] = copies.back();
  }
  std::string out = StartEnvelope(kStateMagic, kStateVersion);
  PutLengthPrefixed32(&out, codec_.spec().ToString());
  PutFixed64(&out, all.size());
  for (const auto& [key, values] : all) {
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
  std::map<std::string, HugePageVector<float>, std::less<>> restored;
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
    const size_t have = Residual(key).size();
    if (have != 0 && have != n) {
      return absl::InvalidArgumentError(absl::StrCat("error-feedback state: residual \"", key,
                                                     "\" has ", n,
                                                     " elements but this model's has ", have));
    }
    HugePageVector<float> values(n);
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
  // Device residuals take their restored values on the device; those the
  // state lacks are dropped, like host ones.
  for (auto& [key, dr] : device_residuals_) {
    auto it = restored.find(key);
    if (it == restored.end()) continue;
    GRADWIRE_RETURN_IF_ERROR(dr.device->Copy(dr.data, it->second.data(), dr.n * sizeof(float),
                                             kernels::CopyKind::kHostToDevice, dr.stream));
    GRADWIRE_RETURN_IF_ERROR(dr.device->WaitStream(dr.stream, absl::Now() + absl::Seconds(60)));
  }
  for (auto it = device_residuals_.begin(); it != device_residuals_.end();) {
    auto r = restored.find(it->first);
    if (r != restored.end()) {
      restored.erase(r);
      ++it;
      continue;
    }
    DeviceResidual& dr = it->second;
    if (dr.device->WaitStream(dr.stream, absl::Now() + absl::Seconds(60)).ok()) {
      dr.device->Free(dr.data);
    }
    it = device_residuals_.erase(it);
  }
  residuals_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace gradwire
