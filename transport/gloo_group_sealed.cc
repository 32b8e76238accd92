// GlooGroup's sealed collectives: the authenticated ring of sealed_ring.h
// behind an agreement round.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/sealed_ring.h"

namespace gradwire {
namespace transport {
namespace {

// The payload of a sealed call's descriptor: u64 hash of the counts,
// segment size and trailer size | u64 step | u32 bucket | u32 stage.
constexpr size_t kPayloadUsed = 24;

std::string DescribePayload(const uint8_t* p) {
  return absl::StrCat("step ", DecodeFixed64(p + 8), ", bucket ", DecodeFixed32(p + 16), ", stage ",
                      DecodeFixed32(p + 20), ", counts/segment hash 0x",
                      absl::Hex(DecodeFixed64(p)));
}

// InvalidArgument "collective mismatch ..." naming who passed what, if
// the payloads differ.
absl::Status CheckSamePayload(const std::vector<CallDescriptor>& all,
                              const std::vector<int>& world_ranks, uint64_t op) {
  std::map<std::string, std::vector<int>> groups;
  for (size_t i = 0; i < all.size(); ++i) {
    groups[std::string(reinterpret_cast<const char*>(all[i].payload), kPayloadUsed)].push_back(
        world_ranks[i]);
  }
  if (groups.size() == 1) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& [payload, ranks] : groups) {
    parts.push_back(
        absl::StrCat(RanksVerb(ranks, "passes", "pass"), " ",
                     DescribePayload(reinterpret_cast<const uint8_t*>(payload.data()))));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("collective mismatch in ", OpName(op), ": ", absl::StrJoin(parts, "; ")));
}

}  // namespace

absl::Status GlooGroup::SealedAllreduceSum(absl::Span<float> data, const ChunkAuthenticator& auth,
                                           const ChunkScope& scope) {
  return SealedImpl(kSealedAllreduce, data, EvenChunks(data.size()), auth, scope);
}

absl::Status GlooGroup::SealedReduceScatterSum(absl::Span<float> data,
                                               absl::Span<const uint64_t> counts,
                                               const ChunkAuthenticator& auth,
                                               const ChunkScope& scope) {
  return SealedImpl(kSealedReduceScatter, data, counts, auth, scope);
}

absl::Status GlooGroup::SealedAllgather(absl::Span<float> data, absl::Span<const uint64_t> counts,
                                        const ChunkAuthenticator& auth, const ChunkScope& scope) {
  return SealedImpl(kSealedAllgather, data, counts, auth, scope);
}

absl::Status GlooGroup::SealedImpl(uint64_t op, absl::Span<float> data,
                                   absl::Span<const uint64_t> counts,
                                   const ChunkAuthenticator& auth, const ChunkScope& scope) {
  return Run(op, /*agreement_round=*/true, [&]() -> absl::Status {
    const uint64_t n = data.size();
    const absl::Status local = CheckCountTable(OpName(op), counts, size_, n);
    // Everything the ring's message sizes and contexts depend on must
    // agree, or a receive would be posted for a message of another size.
    std::vector<uint64_t> shared(counts.begin(), counts.end());
    shared.insert(shared.end(), {options_.sealed_segment_bytes, auth.trailer_bytes()});
    // `shared` carries n (as CheckSameLength wants), the rest is hashed in
    // the payload; the scope travels in it in clear, to be named.
    CallDescriptor mine{op, n, n, local.ok() ? 0 : kArgsBad};
    EncodeFixed64(mine.payload, HashTable(shared));
    EncodeFixed64(mine.payload + 8, scope.step);
    EncodeFixed32(mine.payload + 16, scope.bucket);
    EncodeFixed32(mine.payload + 20, scope.stage);
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(Agree(mine, &all));
    GRADWIRE_RETURN_IF_ERROR(local);
    GRADWIRE_RETURN_IF_ERROR(CheckSameLength(all, world_ranks_, OpName(op), "elements"));
    GRADWIRE_RETURN_IF_ERROR(CheckSamePayload(all, world_ranks_, op));
    if (n == 0 || size_ == 1) return absl::OkStatus();
    SealedRingArgs args;
    args.context = context_.get();
    args.call = NextTag();
    args.auth = &auth;
    args.scope = scope;
    args.world_ranks = world_ranks_;
    args.timeout = options_.timeout;
    args.segment_bytes = options_.sealed_segment_bytes;
    const RingPhases phases = op == kSealedReduceScatter ? RingPhases::kReduceScatter
                              : op == kSealedAllgather   ? RingPhases::kAllgather
                                                         : RingPhases::kAllreduce;
    SealedRingStats stats;
    absl::Status s = SealedRing(args, phases, data, counts, &ring_scratch_, &stats);
    AddBytes(stats.bytes_sent, stats.bytes_received);
    call_.auth_time += stats.auth_time;
    if (s.ok()) return s;
    // A forged chunk: poison (closing the connections makes the peers
    // fail now rather than at their deadline). Anything else is a transfer
    // failure, named like the other rings'.
    return absl::IsUnauthenticated(s) || absl::IsInternal(s) ? Fail(s)
                                                             : TransferFailed(s, /*ring=*/true);
  });
}

}  // namespace transport
}  // namespace gradwire
