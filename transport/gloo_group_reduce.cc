// GlooGroup's reducing collectives: AllreduceSum and ReduceScatterSum.
#include <climits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gloo/algorithm.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/reduce_scatter.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/sealed_ring.h"

namespace gradwire {
namespace transport {
namespace {

// Segment of AllreduceSum's ring: Gloo's own ring segment size.
constexpr uint64_t kPlainRingSegmentBytes = 1 << 20;

// Runs one of Gloo's bound-buffer algorithms (halving-doubling allreduce
// and reduce-scatter). Those use a single member int as both the send and
// the receive buffer of their notification messages, whose value nobody
// reads: ThreadSanitizer reports Gloo's loop thread writing it while the
// caller's writev reads it. Kept out of line so the suppression in
// tests/transport/tsan.supp can name exactly this path.
__attribute__((noinline)) void RunBoundBufferAlgorithm(gloo::Algorithm* algorithm) {
  algorithm->run();
}

// True if every rank holds the built algorithm (kCached).
bool AllCached(const std::vector<CallDescriptor>& all) {
  for (const CallDescriptor& d : all) {
    if (!(d.value & kCached)) return false;
  }
  return true;
}

}  // namespace

absl::Status GlooGroup::AllreduceSum(absl::Span<float> data, AllreduceAlgorithm algorithm) {
  const bool ring = algorithm == AllreduceAlgorithm::kRing;
  const uint64_t op = ring ? kAllreduceRing : kAllreduceHalvingDoubling;
  return Run(op, /*agreement_round=*/true, [&]() -> absl::Status {
    const uint64_t n = data.size();
    // Gloo's halving-doubling keeps byte counts in int.
    absl::Status local;
    if (!ring && n * sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
      local = absl::InvalidArgumentError(
          absl::StrCat("halving-doubling allreduce is limited to ", INT_MAX / sizeof(float),
                       " elements (Gloo uses int byte counts); use the ring for ", n));
    }
    const CacheKey key{data.data(), n};
    const bool cached = !ring && allreduce_hd_.count(key) > 0;
    // `shared` carries n: every rank must reduce the same length.
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(Agree(
        CallDescriptor{op, n, n, (local.ok() ? 0 : kArgsBad) | (cached ? kCached : 0)}, &all));
    GRADWIRE_RETURN_IF_ERROR(local);
    GRADWIRE_RETURN_IF_ERROR(CheckSameLength(all, world_ranks_, OpName(op), "elements"));
    if (n == 0 || size_ == 1) return absl::OkStatus();
    absl::Status s;
    if (ring) {
      // The plain (unsealed) ring of sealed_ring.h, which closes the
      // connections before its buffers go when it fails. (Gloo's own ring
      // allreduce frees its segment buffers as its exception unwinds,
      // while its loop thread may still be reading into them.) The
      // segment size is fixed, so every rank posts the same receives.
      const std::vector<uint64_t> counts = EvenChunks(n);
      SealedRingArgs args;
      args.context = context_.get();
      args.call = NextTag();
      args.world_ranks = world_ranks_;
      args.timeout = options_.timeout;
      args.segment_bytes = kPlainRingSegmentBytes;
      SealedRingStats stats;
      s = SealedRing(args, RingPhases::kAllreduce, data, counts, &ring_scratch_, &stats);
      AddBytes(stats.bytes_sent, stats.bytes_received);
    } else {
      // About 2 (P-1)/P of the tensor each way.
      const uint64_t moved = 2 * (size_ - 1) * n * sizeof(float) / size_;
      AddBytes(moved, moved);
      const bool all_cached = AllCached(all);
      s = CallGloo("allreduce (halving-doubling)", [&] {
        if (!all_cached) {
          // Build on every rank together so context slots stay in lockstep.
          if (allreduce_hd_.size() >= 16) allreduce_hd_.clear();
          allreduce_hd_[key] = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
              context_, std::vector<float*>{data.data()}, static_cast<int>(n));
        }
        RunBoundBufferAlgorithm(allreduce_hd_[key].get());
      });
    }
    return s.ok() ? s : TransferFailed(s, ring);
  });
}

absl::Status GlooGroup::ReduceScatterSum(absl::Span<float> data,
                                         absl::Span<const uint64_t> counts) {
  return Run(kReduceScatter, /*agreement_round=*/true, [&]() -> absl::Status {
    const uint64_t n = data.size();
    absl::Status local = CheckCountTable("reduce_scatter", counts, size_, n);
    if (local.ok() && n * sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
      local = absl::InvalidArgumentError(
          "reduce_scatter is limited to 2^29 elements (Gloo uses int byte counts)");
    }
    const CacheKey key{data.data(), n};
    const uint64_t table = HashTable(counts);
    const bool cached = reduce_scatter_.count({key, table}) > 0;
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(
        Agree(CallDescriptor{kReduceScatter, n, table ^ n,
                             (local.ok() ? 0 : kArgsBad) | (cached ? kCached : 0)},
              &all));
    GRADWIRE_RETURN_IF_ERROR(local);
    GRADWIRE_RETURN_IF_ERROR(
        CheckSame(all, world_ranks_, OpName(kReduceScatter), /*value_is_flags=*/true));
    if (n == 0 || size_ == 1) return absl::OkStatus();
    const uint64_t moved = (n - counts[rank_]) * sizeof(float);
    AddBytes(moved, moved);
    const bool all_cached = AllCached(all);
    absl::Status s = CallGloo("reduce_scatter (halving-doubling)", [&] {
      if (!all_cached) {
        if (reduce_scatter_.size() >= 16) reduce_scatter_.clear();
        std::vector<int> recv(counts.begin(), counts.end());
        reduce_scatter_[{key, table}] = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            context_, std::vector<float*>{data.data()}, static_cast<int>(n), recv);
      }
      RunBoundBufferAlgorithm(reduce_scatter_[{key, table}].get());
    });
    return s.ok() ? s : TransferFailed(s, /*ring=*/false);
  });
}

}  // namespace transport
}  // namespace gradwire
