#include "gradwire/lib/codec/compression_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gradwire {
namespace {

// A name of the spec grammar and the value it stands for.
template <typename T>
struct Named {
  T value;
  absl::string_view name;
};

// The methods, and the settings each one's codec reads (others are refused
// by Parse, see compression_spec.h).
struct MethodEntry {
  Method method;
  absl::string_view name;
  absl::string_view settings;
};
constexpr MethodEntry kMethods[] = {
    {Method::kNone, "none", ""},  // lossless: nothing to select, quantize or feed back
    {Method::kFp16, "fp16", "ef"},
    {Method::kBf16, "bf16", "ef"},
    {Method::kTopK, "topk", "ratio,ef,values,indices"},
    {Method::kApproxTopK, "approx_topk", "ratio,ef,values,indices"},
    // The indices come from the shared seed: none are sent.
    {Method::kRandomK, "randomk", "ratio,ef,seed,values"},
    {Method::kQsgd, "qsgd", "bits,bucket,seed,ef"},
    {Method::kSign, "sign", "bucket,ef"},
};
constexpr absl::string_view kMethodList =
    "none, fp16, bf16, topk, approx_topk, randomk, qsgd, sign";

constexpr Named<ValueType> kValueTypes[] = {
    {ValueType::kFp32, "fp32"}, {ValueType::kFp16, "fp16"}, {ValueType::kBf16, "bf16"}};
constexpr Named<IndexEncoding> kIndexEncodings[] = {{IndexEncoding::kRawU32, "raw"},
                                                    {IndexEncoding::kDeltaVarint, "varint"}};
constexpr Named<CompressionSpec::ErrorFeedback> kErrorFeedbacks[] = {
    {CompressionSpec::ErrorFeedback::kOn, "on"},
    {CompressionSpec::ErrorFeedback::kOff, "off"},
    {CompressionSpec::ErrorFeedback::kDefault, "default"}};

template <typename T, size_t N>
absl::string_view NameOf(const Named<T> (&table)[N], T value) {
  for (const Named<T>& e : table) {
    if (e.value == value) return e.name;
  }
  return "?";
}

// Sets *out to the value `name` stands for in `table`; false if none.
template <typename T, size_t N>
bool ValueOf(const Named<T> (&table)[N], absl::string_view name, T* out) {
  for (const Named<T>& e : table) {
    if (e.name == name) {
      *out = e.value;
      return true;
    }
  }
  return false;
}

// "fp32, fp16, bf16": the names in `table`, for messages.
template <typename T, size_t N>
std::string NameList(const Named<T> (&table)[N]) {
  std::string out;
  for (const Named<T>& e : table) absl::StrAppend(&out, out.empty() ? "" : ", ", e.name);
  return out;
}

// Spec keys and the flags that set the same field in tools/.
struct Key {
  absl::string_view key;
  absl::string_view flag;
};
constexpr Key kKeys[] = {
    {"ratio", "--compression_ratio"}, {"bits", "--quant_bits"}, {"bucket", "--bucket_size"},
    {"ef", "--error_feedback"},       {"seed", "--seed"},       {"values", "--values"},
    {"indices", "--indices"},
};

absl::Status Bad(absl::string_view key, absl::string_view flag, absl::string_view rule,
                 absl::string_view got) {
  return absl::InvalidArgumentError(
      absl::StrCat(key, " (", flag, ") must be ", rule, ", got \"", got, "\""));
}

// One of the named values in `table`, or Bad naming them.
template <typename T, size_t N>
absl::Status SetNamed(const Named<T> (&table)[N], absl::string_view key, absl::string_view flag,
                      absl::string_view value, T* out) {
  if (ValueOf(table, value, out)) return absl::OkStatus();
  return Bad(key, flag, absl::StrCat("one of ", NameList(table)), value);
}

// Shortest decimal that reads back as exactly `v`.
std::string ExactDouble(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    double back = 0;
    if (absl::SimpleAtod(buf, &back) && back == v) break;
  }
  return buf;
}

absl::Status SetKey(absl::string_view key, absl::string_view value, CompressionSpec* spec) {
  if (key == "ratio") {
    double r;
    if (!absl::SimpleAtod(value, &r))
      return Bad(key, "--compression_ratio", "a number in (0, 1]", value);
    spec->ratio = r;
  } else if (key == "bits") {
    int b;
    if (!absl::SimpleAtoi(value, &b)) return Bad(key, "--quant_bits", "an integer in 1..8", value);
    spec->quant_bits = b;
  } else if (key == "bucket") {
    uint32_t b;
    if (!absl::SimpleAtoi(value, &b)) {
      return Bad(key, "--bucket_size", "an integer in 1..4294967295", value);
    }
    spec->bucket_size = b;
  } else if (key == "seed") {
    uint64_t s;
    if (!absl::SimpleAtoi(value, &s))
      return Bad(key, "--seed", "an unsigned 64-bit integer", value);
    spec->seed = s;
  } else if (key == "ef") {
    return SetNamed(kErrorFeedbacks, key, "--error_feedback", value, &spec->error_feedback);
  } else if (key == "values") {
    return SetNamed(kValueTypes, key, "--values", value, &spec->values);
  } else if (key == "indices") {
    return SetNamed(kIndexEncodings, key, "--indices", value, &spec->indices);
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view MethodName(Method method) {
  for (const MethodEntry& e : kMethods) {
    if (e.method == method) return e.name;
  }
  return "unknown";
}

std::vector<std::string> SettingsOf(Method method) {
  for (const MethodEntry& e : kMethods) {
    if (e.method == method) return absl::StrSplit(e.settings, ',', absl::SkipEmpty());
  }
  return {};
}

absl::StatusOr<CompressionSpec> CompressionSpec::Parse(absl::string_view text) {
  CompressionSpec spec;
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(text, absl::MaxSplits(':', 1));
  const absl::string_view name = absl::StripAsciiWhitespace(parts.first);
  bool known = false;
  for (const MethodEntry& e : kMethods) {
    if (e.name == name) {
      spec.method = e.method;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compression method (--compression) must be one of ", kMethodList, ", got \"", name, "\""));
  }
  const bool has_settings = text.find(':') != absl::string_view::npos;
  std::vector<std::string> seen;  // in the text's order
  if (has_settings) {
    for (absl::string_view item : absl::StrSplit(parts.second, ',')) {
      item = absl::StripAsciiWhitespace(item);
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(item, absl::MaxSplits('=', 1));
      const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
      const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
      const Key* known_key = nullptr;
      for (const Key& k : kKeys) {
        if (k.key == key) known_key = &k;
      }
      if (known_key == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown setting \"", key, "\" in compression spec \"", text,
                         "\" (known: ratio, bits, bucket, ef, seed, values, indices)"));
      }
      if (item.find('=') == absl::string_view::npos || value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("setting ", key, " (", known_key->flag, ") needs a value: ", key, "=..."));
      }
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return absl::InvalidArgumentError(absl::StrCat("setting ", key, " (", known_key->flag,
                                                       ") given twice in \"", text, "\""));
      }
      seen.emplace_back(key);
      if (absl::Status s = SetKey(key, value, &spec); !s.ok()) return s;
    }
  }
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  // A setting the method does not read is a mistake ("sign:ratio=0.01"),
  // except in the canonical string, which names every setting.
  const absl::string_view stripped = absl::StripAsciiWhitespace(text);
  if (seen.empty() || spec.ToString() == stripped) return spec;
  const std::vector<std::string> used = SettingsOf(spec.method);
  for (const std::string& key : seen) {
    if (std::find(used.begin(), used.end(), key) != used.end()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", key, " does not apply to method ", name, " in spec \"", stripped, "\" (",
        used.empty() ? absl::StrCat(name, " takes no settings")
                     : absl::StrCat(name, " takes: ", absl::StrJoin(used, ", ")),
        ")"));
  }
  return spec;
}

absl::Status CompressionSpec::Validate() const {
  bool known = false;
  for (const MethodEntry& e : kMethods) known = known || e.method == method;
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("--compression must be one of ", kMethodList,
                                                   ", got method #", static_cast<int>(method)));
  }
  if (!(ratio > 0.0 && ratio <= 1.0)) {  // also refuses NaN
    return absl::InvalidArgumentError(
        absl::StrCat("--compression_ratio must be in (0, 1], got ", ExactDouble(ratio)));
  }
  if (quant_bits < 1 || quant_bits > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--quant_bits must be in 1..8, got ", quant_bits));
  }
  if (bucket_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_size must be in 1..4294967295, got ", bucket_size));
  }
  if (values != ValueType::kFp32 && values != ValueType::kFp16 && values != ValueType::kBf16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--values must be one of fp32, fp16, bf16, got value type #", static_cast<int>(values)));
  }
  if (indices != IndexEncoding::kRawU32 && indices != IndexEncoding::kDeltaVarint) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--indices must be one of raw, varint, got index encoding #", static_cast<int>(indices)));
  }
  if (error_feedback != ErrorFeedback::kDefault && error_feedback != ErrorFeedback::kOn &&
      error_feedback != ErrorFeedback::kOff) {
    return absl::InvalidArgumentError("--error_feedback must be one of on, off, default");
  }
  return absl::OkStatus();
}

CompressionSpec CompressionSpec::ForSender(int rank) const {
  CompressionSpec sender = *this;
  if (method == Method::kQsgd) {
    // splitmix64's finalizer: nearby ranks get unrelated streams.
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(rank) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    sender.seed = z ^ (z >> 31);
  }
  return sender;
}

bool CompressionSpec::UsesErrorFeedback() const {
  switch (error_feedback) {
    case ErrorFeedback::kOn:
      return true;
    case ErrorFeedback::kOff:
      return false;
    case ErrorFeedback::kDefault:
      break;
  }
  // Lossless "none" has nothing to feed back; every other method loses
  // something each step and converges badly without it.
  return method != Method::kNone;
}

std::string CompressionSpec::ToString() const {
  std::string out =
      absl::StrCat(MethodName(method), ":ratio=", ExactDouble(ratio), ",bits=", quant_bits,
                   ",bucket=", bucket_size, ",seed=", seed, ",values=", NameOf(kValueTypes, values),
                   ",indices=", NameOf(kIndexEncodings, indices));
  if (error_feedback != ErrorFeedback::kDefault) {
    absl::StrAppend(&out, ",ef=", NameOf(kErrorFeedbacks, error_feedback));
  }
  return out;
}

uint64_t CompressionSpec::SelectedCount(uint64_t n) const {
  if (n == 0) return 0;
  const double want = std::round(ratio * static_cast<double>(n));
  if (!(want >= 1.0)) return 1;
  if (want >= static_cast<double>(n)) return n;
  return static_cast<uint64_t>(want);
}

}  // namespace gradwire
