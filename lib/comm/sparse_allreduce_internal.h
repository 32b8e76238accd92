// Helpers the sparse allreduce's files share (sparse_allreduce.cc and
// sparse_allreduce_survivors.cc); not part of its interface.
#ifndef GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_INTERNAL_H_
#define GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/compression_spec.h"

namespace gradwire {
namespace sparse_allreduce_internal {

inline kernels::ValueFormat Format(ValueType type) {
  return static_cast<kernels::ValueFormat>(type);
}

// +0 or -0.
inline bool IsZero(float x) { return (kernels::FloatBits(x) & 0x7fffffffu) == 0; }

// "<what> from rank R (bucket b, step s) rejected: <why>", same code.
inline absl::Status Rejected(const absl::Status& s, absl::string_view what, int rank,
                             uint32_t bucket, uint64_t step) {
  return absl::Status(s.code(), absl::StrCat(what, " from rank ", rank, " (bucket ", bucket,
                                             ", step ", step, ") rejected: ", s.message()));
}

}  // namespace sparse_allreduce_internal
}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_SPARSE_ALLREDUCE_INTERNAL_H_
