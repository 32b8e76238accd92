// Communicator's hierarchical mode (communicator.h; docs/communicator.md,
// "Hierarchical"): the two-level average of a compressed bucket
// (Hierarchical) and of a dense one (DenseHierarchical), and what they share.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gradwire/base/ensure_size.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/comm/communicator.h"

namespace gradwire {

bool Communicator::DenseTakesTwoLevels(uint64_t elements) const {
  return options_.hierarchical && DenseTwoLevel(cross_->size(), node_->size(), elements, model_);
}

uint64_t Communicator::SetShards(uint64_t n) {
  const int local = node_->size();
  // Shards of ceil(n / local) elements; the last ones take what is left
  // (possibly nothing when n < local).
  const uint64_t shard = (n + local - 1) / local;
  for (int r = 0; r < local; ++r) {
    const uint64_t begin = std::min<uint64_t>(n, r * shard);
    shards_[r] = std::min<uint64_t>(shard, n - begin);
  }
  return std::min<uint64_t>(n, node_->rank() * shard);
}

absl::Status Communicator::ShareCrossVerdict(const absl::Status& cross, uint32_t bucket,
                                             uint64_t step, ExchangeStats* cost) {
  // Each cross-node group sees only its own failures (say, a forged frame
  // in local rank 1's group): share the verdict inside the node, so every
  // rank reports the failure instead of waiting for peers that gave up.
  const int local = node_->size();
  EnsureSize(&verdicts_, local);
  absl::Status s = node_->AllgatherU64(static_cast<uint64_t>(cross.code()),
                                       absl::MakeSpan(verdicts_.data(), local));
  AddWire(*node_, cost);
  GRADWIRE_RETURN_IF_ERROR(cross);
  GRADWIRE_RETURN_IF_ERROR(s);
  for (int r = 0; r < local; ++r) {
    if (verdicts_[r] != 0) {
      return absl::Status(
          static_cast<absl::StatusCode>(verdicts_[r]),
          absl::StrCat("rank ", node_->world_ranks()[r], " of this node failed the cross-node ",
                       "exchange of bucket ", bucket, " step ", step, " (",
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(verdicts_[r])),
                       "; see its log): the node discards the result"));
    }
  }
  return absl::OkStatus();
}

absl::Status Communicator::DenseHierarchical(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                             ExchangeStats* cost) {
  const uint64_t begin = SetShards(data.size());
  const int me = node_->rank();
  // 1. Sealed reduce-scatter inside the node, in place (as the world's
  // ring is): my shard of the node's sum at its place.
  absl::Status s = node_->SealedReduceScatterSum(data, shards_, *chunk_auth_,
                                                 {step, bucket, kDenseNodeReduceScatterStage});
  AddWire(*node_, cost);
  GRADWIRE_RETURN_IF_ERROR(s);
  // 2. The sealed ring across nodes on my shard, then the division: every
  // rank of my cross-node group ends with its owner's bits.
  const absl::Span<float> mine = data.subspan(begin, shards_[me]);
  absl::Status cross =
      cross_->SealedAllreduceSum(mine, *chunk_auth_, {step, bucket, kDenseCrossStage});
  AddWire(*cross_, cost);
  if (cross.ok()) Average(mine, cost);
  GRADWIRE_RETURN_IF_ERROR(ShareCrossVerdict(cross, bucket, step, cost));
  // 3. Every rank of the node gets every averaged shard.
  s = node_->SealedAllgather(data, shards_, *chunk_auth_, {step, bucket, kDenseNodeAllgatherStage});
  AddWire(*node_, cost);
  return s;
}

absl::Status Communicator::Hierarchical(absl::string_view key, uint32_t bucket, uint64_t step,
                                        absl::Span<float> data, ExchangeStats* cost) {
  const uint64_t n = data.size();
  GRADWIRE_RETURN_IF_ERROR(flat_->Agree(*world_, bucket, step, n, cost));
  const int local = node_->size();
  const int me = node_->rank();
  const uint64_t begin = SetShards(n);
  // 1. Sealed reduce-scatter inside the node, on a copy: the caller's data
  // must stay intact until the exchange has succeeded. My shard stays at
  // its place.
  EnsureSize(&work_, n);
  absl::Span<float> work = absl::MakeSpan(work_.data(), n);
  std::copy(data.begin(), data.end(), work.begin());
  if (local > 1) {
    absl::Status s = node_->SealedReduceScatterSum(work, shards_, *chunk_auth_,
                                                   {step, bucket, kNodeReduceScatterStage});
    AddWire(*node_, cost);
    GRADWIRE_RETURN_IF_ERROR(s);
  }
  // 2-3. Compress my shard of the node's sum and average it across nodes.
  absl::Span<float> mine = work.subspan(begin, shards_[me]);
  // Every rank of the cross group holds a shard of the same size: the
  // same choice.
  const float world = static_cast<float>(world_->size());
  const ExchangeKind kind = KindFor(n);
  absl::Status cross =
      kind == ExchangeKind::kSparseAllreduce
          ? sparse_allreduce_->Run(*cross_, ef_, key, bucket, step, mine, mine, world, cost)
      : kind == ExchangeKind::kCastAllreduce
          ? cast_allreduce_->Run(*cross_, ef_, key, bucket, step, mine, mine, world, cost)
          : across_nodes_->Run(*cross_, ef_, key, bucket, step, mine, mine, world, cost);
  if (local == 1) {
    GRADWIRE_RETURN_IF_ERROR(cross);
    std::copy(mine.begin(), mine.end(), data.begin());
    return absl::OkStatus();
  }
  GRADWIRE_RETURN_IF_ERROR(ShareCrossVerdict(cross, bucket, step, cost));
  // 4. Every rank of the node gets every averaged shard (sealed allgather,
  // in place: my shard goes to its place in `data` first).
  std::copy(mine.begin(), mine.end(), data.begin() + begin);
  absl::Status s =
      node_->SealedAllgather(data, shards_, *chunk_auth_, {step, bucket, kNodeAllgatherStage});
  AddWire(*node_, cost);
  return s;
}

}  // namespace gradwire
