// The exchange cost model's figures by name (exchange_cost_model.h's
// ExchangeModel), and its text form: how the tools' --exchange_model flag
// and Python's exchange_model={...} set them, from the cost model's table
// of them (ExchangeModelFields, exchange_cost_model.h).
//
//   bytes_per_second=1.25e8,seconds_per_round=2e-4
//
// is a 1 Gbit/s link with 200 us per message step and the defaults'
// other seven figures. Names are the struct's members; values are decimal
// numbers (what absl::SimpleAtod reads). A rate (and cores_per_rank)
// must be positive and finite, a time finite and >= 0: a model the
// Communicator can predict with (its Create refuses any other).
#ifndef GRADWIRE_LIB_COMM_EXCHANGE_MODEL_SPEC_H_
#define GRADWIRE_LIB_COMM_EXCHANGE_MODEL_SPEC_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/lib/comm/exchange_cost_model.h"

namespace gradwire {

// The field called `name`; nullptr for any other name.
const ExchangeModelField* FindExchangeModelField(absl::string_view name);

// "a, b, ...": every field's name, for error messages.
std::string ExchangeModelFieldNames();

// OK, or InvalidArgument naming the first field out of its range ("NAME
// must be a positive finite number, got nan").
absl::Status CheckExchangeModel(const ExchangeModel& model);

// `base` with the figures `text` names set: "name=value" entries
// separated by ','. Empty text is `base` itself. InvalidArgument, naming
// the entry, for an entry without '=', an unknown or repeated name, a
// value that is not a number, or a result CheckExchangeModel refuses.
absl::StatusOr<ExchangeModel> ParseExchangeModel(absl::string_view text,
                                                 const ExchangeModel& base = ExchangeModel());

// All nine figures in the text form, each the shortest decimal that reads
// back as the same double (ParseExchangeModel gives back the same bits).
std::string ExchangeModelToString(const ExchangeModel& model);

// The figures as a JSON object, {"bytes_per_second": 1.25e+09, ...}, each
// a %.17g number (the same double when read back): what the tools' JSON
// results record.
std::string ExchangeModelJson(const ExchangeModel& model);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_EXCHANGE_MODEL_SPEC_H_
