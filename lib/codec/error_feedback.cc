#include "gradwire/lib/codec/error_feedback.h"

#include <xxhash.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace {

// State layout (all little endian):
//   "GWEF" | u32 version | u32 spec_len | spec (CompressionSpec::ToString)
//   | u64 count | count * (u32 key_len | key | u64 n | n * f32)
//   | u64 XXH3-64 of everything before it
constexpr char kStateMagic[4] = {'G', 'W', 'E', 'F'};
constexpr uint32_t kStateVersion = 1;

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, sizeof(T));
}

// Reads little-endian fields with bounds checks; every failure names what
// it was reading.
class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}

  template <typename T>
  absl::Status Get(absl::string_view what, T* v) {
    if (in_.size() - pos_ < sizeof(T)) return Truncated(what);
    T r = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      r |= static_cast<T>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(T);
    *v = r;
    return absl::OkStatus();
  }

  absl::Status Bytes(absl::string_view what, uint64_t n, absl::string_view* v) {
    if (in_.size() - pos_ < n) return Truncated(what);
    *v = in_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  size_t left() const { return in_.size() - pos_; }

 private:
  absl::Status Truncated(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("error-feedback state truncated reading ", what,
                                                   " at byte ", pos_, " of ", in_.size()));
  }

  absl::string_view in_;
  size_t pos_ = 0;
};

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
                                                     "\", whose residual has ",
                                                     residual.size(), " elements"));
    }
  }
  for (size_t j = 0; j < indices.size(); ++j) {
    residual[indices[j]] = kernels::ResidualAfter(residual[indices[j]], -values[j]);
  }
  return absl::OkStatus();
}

std::string ErrorFeedback::SaveState() const {
  std::string out(kStateMagic, sizeof kStateMagic);
  Put<uint32_t>(&out, kStateVersion);
  const std::string spec = codec_.spec().ToString();
  Put<uint32_t>(&out, static_cast<uint32_t>(spec.size()));
  out += spec;
  Put<uint64_t>(&out, residuals_.size());
  for (const auto& [key, values] : residuals_) {
    Put<uint32_t>(&out, static_cast<uint32_t>(key.size()));
    out += key;
    Put<uint64_t>(&out, values.size());
    for (float v : values) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      Put<uint32_t>(&out, bits);
    }
  }
  Put<uint64_t>(&out, XXH3_64bits(out.data(), out.size()));
  return out;
}

absl::Status ErrorFeedback::RestoreState(absl::string_view state) {
  if (state.size() < sizeof kStateMagic + 8 ||
      std::memcmp(state.data(), kStateMagic, sizeof kStateMagic) != 0) {
    return absl::InvalidArgumentError(
        "not an error-feedback state (missing \"GWEF\" magic or too short)");
  }
  const absl::string_view body = state.substr(0, state.size() - 8);
  Reader tail(state.substr(state.size() - 8));
  uint64_t stored = 0;
  if (absl::Status s = tail.Get("checksum", &stored); !s.ok()) return s;
  if (stored != XXH3_64bits(body.data(), body.size())) {
    return absl::DataLossError("error-feedback state checksum mismatch: the bytes are corrupt");
  }
  Reader r(body.substr(sizeof kStateMagic));
  uint32_t version = 0, spec_len = 0;
  if (absl::Status s = r.Get("version", &version); !s.ok()) return s;
  if (version != kStateVersion) {
    return absl::InvalidArgumentError(absl::StrCat("error-feedback state version ", version,
                                                   " is not supported (this build reads ",
                                                   kStateVersion, ")"));
  }
  if (absl::Status s = r.Get("spec length", &spec_len); !s.ok()) return s;
  absl::string_view spec;
  if (absl::Status s = r.Bytes("spec", spec_len, &spec); !s.ok()) return s;
  const std::string mine = codec_.spec().ToString();
  if (spec != mine) {
    return absl::InvalidArgumentError(absl::StrCat("error-feedback state was saved for codec \"",
                                                   spec, "\" but this one is \"", mine, "\""));
  }
  uint64_t count = 0;
  if (absl::Status s = r.Get("key count", &count); !s.ok()) return s;
  std::map<std::string, std::vector<float>, std::less<>> restored;
  for (uint64_t e = 0; e < count; ++e) {
    uint32_t key_len = 0;
    uint64_t n = 0;
    absl::string_view key, raw;
    if (absl::Status s = r.Get("key length", &key_len); !s.ok()) return s;
    if (absl::Status s = r.Bytes("key", key_len, &key); !s.ok()) return s;
    if (absl::Status s = r.Get("residual length", &n); !s.ok()) return s;
    if (n > r.left() / 4) {
      return absl::InvalidArgumentError(absl::StrCat("error-feedback state: residual \"", key,
                                                     "\" claims ", n, " elements but only ",
                                                     r.left(), " bytes remain"));
    }
    if (absl::Status s = r.Bytes("residual", n * 4, &raw); !s.ok()) return s;
    auto existing = residuals_.find(key);
    if (existing != residuals_.end() && existing->second.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("error-feedback state: residual \"", key, "\" has ", n,
                       " elements but this model's has ", existing->second.size()));
    }
    std::vector<float> values(n);
    if (n > 0) std::memcpy(values.data(), raw.data(), n * 4);  // little-endian host
    if (!restored.emplace(std::string(key), std::move(values)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("error-feedback state: key \"", key, "\" appears twice"));
    }
  }
  if (r.left() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("error-feedback state has ", r.left(), " unexpected trailing bytes"));
  }
  residuals_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace gradwire
