#include "gradwire/lib/comm/exchange_model_spec.h"

#include <charconv>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gradwire {
const ExchangeModelField* FindExchangeModelField(absl::string_view name) {
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string ExchangeModelFieldNames() {
  std::string names;
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", f.name);
  }
  return names;
}

absl::Status CheckExchangeModel(const ExchangeModel& model) {
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    const double value = model.*f.member;
    const bool ok = std::isfinite(value) && (f.is_time ? value >= 0 : value > 0);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.name,
                       f.is_time ? " must be a finite number >= 0, got "
                                 : " must be a positive finite number, got ",
                       value));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExchangeModel> ParseExchangeModel(absl::string_view text,
                                                 const ExchangeModel& base) {
  ExchangeModel model = base;
  if (text.empty()) return model;
  std::vector<const ExchangeModelField*> seen;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("exchange model entry \"", entry,
                       "\" is not name=value (the names: ", ExchangeModelFieldNames(), ")"));
    }
    const absl::string_view name = entry.substr(0, eq), value = entry.substr(eq + 1);
    const ExchangeModelField* field = FindExchangeModelField(name);
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("exchange model: unknown name \"", name,
                                                     "\" (the names: ", ExchangeModelFieldNames(),
                                                     ")"));
    }
    for (const ExchangeModelField* s : seen) {
      if (s == field) {
        return absl::InvalidArgumentError(
            absl::StrCat("exchange model: \"", name, "\" given twice"));
      }
    }
    seen.push_back(field);
    double number = 0;
    if (!absl::SimpleAtod(value, &number)) {
      return absl::InvalidArgumentError(
          absl::StrCat("exchange model: ", name, "=\"", value, "\" is not a number"));
    }
    model.*field->member = number;
  }
  absl::Status s = CheckExchangeModel(model);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("exchange model: ", s.message()));
  return model;
}

std::string ExchangeModelToString(const ExchangeModel& model) {
  std::string text;
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    // The shortest text that reads back as the same double.
    char number[32];
    const std::to_chars_result r = std::to_chars(number, number + sizeof(number), model.*f.member);
    absl::StrAppend(&text, text.empty() ? "" : ",", f.name, "=",
                    absl::string_view(number, r.ptr - number));
  }
  return text;
}

std::string ExchangeModelJson(const ExchangeModel& model) {
  std::string json;
  for (const ExchangeModelField& f : ExchangeModelFields()) {
    absl::StrAppendFormat(&json, "%s\"%s\": %.17g", json.empty() ? "{" : ", ", f.name,
                          model.*f.member);
  }
  return json + "}";
}

}  // namespace gradwire
