// The agreement round of the region exchanges (sparse_allreduce.h,
// cast_allreduce.h): before any receive is posted at a size derived from
// them, every rank learns whether the group agrees on a few words (spec
// fingerprint, length, step, bucket, ...), in rounds that do not grow
// linearly with the group:
//   - where the group gathers small blocks directly (P <= 16 by default),
//     one direct allgather of every rank's words, through the group's own
//     agreement round, which also turns a rank that is in another
//     collective into "collective mismatch" on every rank;
//   - else a recursive-doubling min-allreduce of the words and of their
//     complements (their min and max), log2 P steps.
#ifndef GRADWIRE_LIB_COMM_EXCHANGE_AGREEMENT_H_
#define GRADWIRE_LIB_COMM_EXCHANGE_AGREEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/transport/gloo_group.h"

namespace gradwire {

// Collective. On success *unequal has bit i set iff the ranks do not all
// hold the same fields[i] (the same answer on every rank); at most 32
// fields, the same count on every rank. `scratch` is grown and reused.
// The call's transfer is added to `cost`. Errors: the transport's.
absl::Status AgreeOnFields(transport::GlooGroup& group, absl::Span<const uint64_t> fields,
                           std::vector<uint64_t>* scratch, uint32_t* unequal, ExchangeStats* cost);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_EXCHANGE_AGREEMENT_H_
