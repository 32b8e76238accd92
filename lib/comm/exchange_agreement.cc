#include "gradwire/lib/comm/exchange_agreement.h"

#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {

absl::Status AgreeOnFields(transport::GlooGroup& group, absl::Span<const uint64_t> fields,
                           std::vector<uint64_t>* scratch, uint32_t* unequal, ExchangeStats* cost) {
  using transport::SparseCollectives;
  const size_t f = fields.size();
  if (f > 32) return absl::InvalidArgumentError("AgreeOnFields: more than 32 fields");
  const int p = group.size();
  *unequal = 0;
  if (SparseCollectives::GathersDirectly(group)) {
    scratch->resize(f * p);
    absl::Status s = group.Allgather(
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(fields.data()), f * 8),
        absl::MakeSpan(reinterpret_cast<uint8_t*>(scratch->data()), scratch->size() * 8));
    cost->AddCall(group.last_call());
    if (!s.ok()) return s;
    for (int r = 0; r < p; ++r) {
      for (size_t i = 0; i < f; ++i) {
        if ((*scratch)[r * f + i] != fields[i]) *unequal |= 1u << i;
      }
    }
    return absl::OkStatus();
  }
  // The min over ranks of each field and of its complement: its min and max.
  scratch->resize(2 * f);
  for (size_t i = 0; i < f; ++i) {
    (*scratch)[i] = fields[i];
    (*scratch)[f + i] = ~fields[i];
  }
  absl::Status s =
      SparseCollectives::AllreduceU64(group, absl::MakeSpan(*scratch), transport::ReduceOp::kMin);
  cost->AddCall(group.last_call());
  if (!s.ok()) return s;
  for (size_t i = 0; i < f; ++i) {
    if ((*scratch)[i] != ~(*scratch)[f + i]) *unequal |= 1u << i;
  }
  return absl::OkStatus();
}

}  // namespace gradwire
