#include "gradwire/transport/agreement.h"

#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/envelope.h"

namespace gradwire {
namespace transport {

const char* OpName(uint64_t op) {
  switch (op) {
    case kAllgatherU64:
      return "allgather_u64";
    case kAllgatherv:
      return "allgatherv";
    case kAllgathervBounded:
      return "allgatherv_bounded";
    case kAllgather:
      return "allgather";
    case kAllreduceRing:
      return "allreduce_ring";
    case kAllreduceHalvingDoubling:
      return "allreduce_halving_doubling";
    case kReduceScatter:
      return "reduce_scatter";
    case kBarrier:
      return "barrier";
    case kSplit:
      return "split";
    case kExpectSame:
      return "expect_same";
    case kSealedAllreduce:
      return "allreduce_ring_sealed";
    case kSealedReduceScatter:
      return "reduce_scatter_ring_sealed";
    case kSealedAllgather:
      return "allgather_ring_sealed";
  }
  return "unknown";
}

void CallDescriptor::EncodeTo(uint8_t* out) const {
  EncodeFixed64(out, op);
  EncodeFixed64(out + 8, count);
  EncodeFixed64(out + 16, shared);
  EncodeFixed64(out + 24, value);
  std::memcpy(out + 32, payload, kPayloadBytes);
}

CallDescriptor CallDescriptor::DecodeFrom(const uint8_t* in) {
  CallDescriptor d;
  d.op = DecodeFixed64(in);
  d.count = DecodeFixed64(in + 8);
  d.shared = DecodeFixed64(in + 16);
  d.value = DecodeFixed64(in + 24);
  std::memcpy(d.payload, in + 32, kPayloadBytes);
  return d;
}

uint64_t HashTable(absl::Span<const uint64_t> table) {
  std::string bytes;
  bytes.reserve(8 * table.size());
  for (uint64_t v : table) PutFixed64(&bytes, v);
  return Checksum64(bytes);
}

std::string NameRanks(absl::Span<const int> ranks) {
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  return absl::StrCat("ranks [", absl::StrJoin(ranks, ", "), "]");
}

std::string RanksVerb(absl::Span<const int> ranks, const char* one, const char* many) {
  return absl::StrCat(NameRanks(ranks), " ", ranks.size() == 1 ? one : many);
}

absl::Status CheckSame(absl::Span<const CallDescriptor> all, absl::Span<const int> world_ranks,
                       const char* op, bool value_is_flags) {
  // Group ranks by each field; any field with two groups is a mismatch.
  auto split_by = [&](auto field) {
    std::map<uint64_t, std::vector<int>> groups;
    for (size_t i = 0; i < all.size(); ++i) groups[field(all[i])].push_back(world_ranks[i]);
    return groups;
  };
  auto ops = split_by([](const CallDescriptor& d) { return d.op; });
  if (ops.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [o, ranks] : ops)
      parts.push_back(absl::StrCat(NameRanks(ranks), " called ", OpName(o)));
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch: ", absl::StrJoin(parts, "; ")));
  }
  if (value_is_flags) {
    std::vector<int> bad;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].value & kArgsBad) bad.push_back(world_ranks[i]);
    }
    if (!bad.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("collective mismatch in ", op, ": ",
                                                     NameRanks(bad), " passed invalid arguments"));
    }
  }
  auto shared = split_by([](const CallDescriptor& d) { return d.shared; });
  if (shared.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [h, ranks] : shared) parts.push_back(NameRanks(ranks));
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in ", op, ": ranks disagree on shared arguments (",
                     "size table or counts): ", absl::StrJoin(parts, " vs ")));
  }
  return absl::OkStatus();
}

absl::Status CheckSameLength(absl::Span<const CallDescriptor> all,
                             absl::Span<const int> world_ranks, const char* op, const char* unit) {
  absl::Status s = CheckSame(all, world_ranks, op, /*value_is_flags=*/true);
  if (s.ok()) return s;
  std::map<uint64_t, std::vector<int>> by_length;
  for (size_t i = 0; i < all.size(); ++i) by_length[all[i].count].push_back(world_ranks[i]);
  if (by_length.size() < 2 || !absl::StrContains(s.message(), "shared")) return s;
  std::vector<std::string> parts;
  for (const auto& [length, ranks] : by_length) {
    parts.push_back(absl::StrCat(RanksVerb(ranks, "passes", "pass"), " ", length, " ", unit));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("collective mismatch in ", op, ": ", absl::StrJoin(parts, "; ")));
}

absl::Status CheckCountTable(const char* op, absl::Span<const uint64_t> counts, int size,
                             uint64_t n) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (counts.size() == static_cast<size_t>(size) && total == n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", counts.size(), " counts summing to ",
                                                 total, " for ", size, " ranks and ", n,
                                                 " elements"));
}

absl::Status NameMissing(const absl::Status& failure, absl::string_view what,
                         absl::Span<const Arrival> arrivals, absl::Span<const int> world_ranks,
                         absl::Duration timeout) {
  std::vector<int> arrived, missing, unknown;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    switch (arrivals[i]) {
      case Arrival::kArrived:
        arrived.push_back(world_ranks[i]);
        break;
      case Arrival::kMissing:
        missing.push_back(world_ranks[i]);
        break;
      case Arrival::kUnknown:
        unknown.push_back(world_ranks[i]);
        break;
    }
  }
  if (missing.empty()) return failure;
  // A long list of those present says less than their number.
  std::string others =
      arrived.size() <= 16 ? NameRanks(arrived) : absl::StrCat(arrived.size(), " ranks");
  if (!unknown.empty()) {
    absl::StrAppend(&others, " did; nothing is known of ", NameRanks(unknown));
  } else {
    absl::StrAppend(&others, " did");
  }
  const std::string verdict = absl::StrCat(what, ": ", NameRanks(missing), " did not arrive");
  if (failure.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(
        failure.code(),
        absl::StrCat(verdict, " within ", absl::FormatDuration(timeout), " (", others, ")"));
  }
  // CallGloo began the message with `what` already.
  absl::string_view cause = failure.message();
  absl::ConsumePrefix(&cause, absl::StrCat(what, ": "));
  return absl::Status(failure.code(), absl::StrCat(verdict, " (", others, "): ", cause));
}

}  // namespace transport
}  // namespace gradwire
