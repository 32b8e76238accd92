// GlooGroup's life: forming a group, the agreement round every collective
// starts with, poisoning, Barrier, Close and Split. The collectives live in
// gloo_group_gather.cc and gloo_group_reduce.cc.
#include "gradwire/transport/gloo_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/direct_allgather.h"
#include "gradwire/transport/gloo_connect.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/ring_allgather.h"

namespace gradwire {
namespace transport {

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Create(int rank, int size,
                                                             std::shared_ptr<RendezvousStore> store,
                                                             const GroupOptions& options) {
  if (size <= 0 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("bad rank ", rank, " of ", size));
  }
  if (store == nullptr) return absl::InvalidArgumentError("GlooGroup needs a store");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("GlooGroup timeout must be positive");
  }
  if (options.event_loop_nice < 0 || options.event_loop_nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlooGroup event_loop_nice must be in [0, 19], not ", options.event_loop_nice,
                     " (lowering a nice value needs privileges)"));
  }
  if (options.sealed_segment_bytes < 64 || options.sealed_segment_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlooGroup sealed_segment_bytes must be a multiple of 4, at least 64, not ",
                     options.sealed_segment_bytes));
  }
  IgnoreSigpipeIfDefault();
  GRADWIRE_ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device,
                            CreateTcpDevice(options.bind_address, options.event_loop_nice));
  std::shared_ptr<gloo::Context> context;
  if (size > 1) {
    GRADWIRE_ASSIGN_OR_RETURN(
        context, ConnectFullMesh(rank, size, store, device, options.timeout,
                                 absl::StrCat("rendezvous of rank ", rank, " of ", size, " under '",
                                              store->prefix(), "'")));
  }
  std::vector<int> ranks(size);
  for (int i = 0; i < size; ++i) ranks[i] = i;
  return std::unique_ptr<GlooGroup>(new GlooGroup(rank, size, std::move(store), options,
                                                  std::move(device), std::move(context),
                                                  std::move(ranks)));
}

GlooGroup::GlooGroup(int rank, int size, std::shared_ptr<RendezvousStore> store,
                     const GroupOptions& options, std::shared_ptr<gloo::transport::Device> device,
                     std::shared_ptr<gloo::Context> context, std::vector<int> world_ranks)
    : rank_(rank),
      size_(size),
      store_(std::move(store)),
      options_(options),
      device_(std::move(device)),
      context_(std::move(context)),
      world_ranks_(std::move(world_ranks)) {}

GlooGroup::~GlooGroup() {
  // Algorithms hold buffers bound to the context's pairs: drop them first.
  allreduce_hd_.clear();
  reduce_scatter_.clear();
}

absl::Status GlooGroup::health() const { return poison_; }

absl::Status GlooGroup::CheckUsable() const {
  if (poison_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("poisoned by earlier failure: ", poison_.message()));
}

absl::Status GlooGroup::Fail(absl::Status status) {
  if (poison_.ok()) poison_ = status;
  // Closing our side makes peers blocked on us fail now with Unavailable
  // rather than after their full timeout.
  CloseConnections(context_.get());
  return status;
}

absl::Status GlooGroup::Run(uint64_t op, bool agreement_round,
                            absl::FunctionRef<absl::Status()> body) {
  GRADWIRE_RETURN_IF_ERROR(CheckUsable());
  const absl::Time start = absl::Now();
  call_ = CallStats();
  call_.op = OpName(op);
  // The agreement round sends our descriptor to, and takes one from, each
  // peer (directly, or forwarded around the ring: the same bytes).
  const uint64_t round =
      agreement_round ? CallDescriptor::kEncodedBytes * static_cast<uint64_t>(size_ - 1) : 0;
  call_.bytes_sent = round;
  call_.bytes_received = round;
  agree_time_ = absl::ZeroDuration();
  const absl::Status status = body();
  call_.wire_time = absl::Now() - start;
  call_.agree_time = agree_time_;
  last_call_ = call_;
  totals_.Add(call_);
  if (!status.ok()) ++totals_.failed_calls;
  return status;
}

absl::Status GlooGroup::Agree(const CallDescriptor& mine, std::vector<CallDescriptor>* all) {
  all->assign(size_, CallDescriptor());
  (*all)[rank_] = mine;
  if (size_ == 1) return absl::OkStatus();
  // Booked on every return: the call's stats split it out of wire time.
  struct Booked {
    absl::Duration* total;
    absl::Time start;
    ~Booked() { *total += absl::Now() - start; }
  } booked{&agree_time_, absl::Now()};
  // Always direct, whatever the group size: the blocks are a few dozen
  // bytes, one hop beats the ring's P - 1, and only a direct round knows
  // which ranks arrived.
  constexpr size_t kBytes = CallDescriptor::kEncodedBytes;
  std::vector<uint8_t> wire(size_ * kBytes);
  uint8_t* my_block = wire.data() + rank_ * kBytes;
  mine.EncodeTo(my_block);
  const std::vector<uint64_t> sizes(size_, kBytes);
  GRADWIRE_RETURN_IF_ERROR(DirectGather(my_block, sizes, wire.data(), /*window=*/0,
                                        absl::StrCat(OpName(mine.op), ": agreement round")));
  for (int i = 0; i < size_; ++i) (*all)[i] = CallDescriptor::DecodeFrom(&wire[i * kBytes]);
  return absl::OkStatus();
}

absl::Status GlooGroup::DirectGather(const uint8_t* mine, absl::Span<const uint64_t> sizes,
                                     uint8_t* out, int window, const std::string& what) {
  std::vector<Arrival> arrivals;
  absl::Status s = DirectAllgatherv(context_.get(), NextTag(), mine, sizes, out, options_.timeout,
                                    window, what, &arrivals);
  if (s.ok()) return s;
  return Fail(NameMissing(s, what, arrivals, world_ranks_, options_.timeout));
}

absl::Status GlooGroup::RingGather(const uint8_t* mine, absl::Span<const uint64_t> sizes,
                                   uint8_t* out, const char* what) {
  absl::Status s =
      RingAllgatherv(context_.get(), NextTag(), mine, sizes, out, options_.timeout, what);
  return s.ok() ? s : TransferFailed(s, /*ring=*/true);
}

absl::Status GlooGroup::DirectGatherBounded(const uint8_t* mine, uint64_t mine_bytes,
                                            absl::Span<const uint64_t> capacities, uint8_t* out,
                                            const std::string& what) {
  std::vector<Arrival> arrivals;
  absl::Status s =
      DirectAllgathervBounded(context_.get(), NextTag(), mine, mine_bytes, capacities, out,
                              options_.timeout, options_.receive_window, what, &arrivals);
  if (s.ok()) return s;
  return Fail(NameMissing(s, what, arrivals, world_ranks_, options_.timeout));
}

absl::Status GlooGroup::RingGatherBounded(const uint8_t* mine, uint64_t mine_bytes,
                                          absl::Span<const uint64_t> capacities, uint8_t* out,
                                          const char* what) {
  absl::Status s = RingAllgathervBounded(context_.get(), NextTag(), mine, mine_bytes, capacities,
                                         out, options_.timeout, what);
  return s.ok() ? s : TransferFailed(s, /*ring=*/true);
}

absl::Status GlooGroup::TransferFailed(absl::Status s, bool ring) {
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    // Every rank was at the agreement round moments ago, so one stalled
    // or died during the transfer. A ring rank exchanges with its two
    // neighbours only; halving-doubling changes partner every step.
    std::string whom;
    if (ring) {
      std::vector<int> neighbours{world_ranks_[(rank_ + size_ - 1) % size_]};
      if (size_ > 2) neighbours.push_back(world_ranks_[(rank_ + 1) % size_]);
      std::sort(neighbours.begin(), neighbours.end());
      whom = absl::StrCat("; it was waiting on its ring neighbours (", NameRanks(neighbours),
                          "), and a rank stalled anywhere stalls the whole ring");
    }
    s = absl::DeadlineExceededError(
        absl::StrCat(s.message(),
                     " (every rank had passed the agreement round: a peer stalled or died "
                     "during the transfer",
                     whom, ")"));
  }
  return Fail(s);
}

absl::Status GlooGroup::Barrier() {
  return Run(kBarrier, /*agreement_round=*/true, [&] {
    // The agreement round is itself a barrier: no rank completes an
    // allgather before every rank has contributed.
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(Agree(CallDescriptor{kBarrier, 0, 0, 0}, &all));
    return CheckSame(all, world_ranks_, OpName(kBarrier), /*value_is_flags=*/true);
  });
}

absl::Status GlooGroup::Close() {
  GRADWIRE_RETURN_IF_ERROR(Barrier());
  allreduce_hd_.clear();
  reduce_scatter_.clear();
  absl::Status s;
  if (context_ != nullptr) {
    s = CallGloo("closing connections", [&] { context_->closeConnections(); });
  }
  if (poison_.ok()) poison_ = absl::CancelledError("group was closed");
  return s;
}

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Split(uint32_t color) {
  std::vector<CallDescriptor> all;
  GRADWIRE_RETURN_IF_ERROR(Run(kSplit, /*agreement_round=*/true, [&] {
    GRADWIRE_RETURN_IF_ERROR(Agree(CallDescriptor{kSplit, 0, 0, color}, &all));
    return CheckSame(all, world_ranks_, OpName(kSplit), /*value_is_flags=*/false);
  }));
  std::vector<int> members;  // our ranks with this color, ascending
  int sub_rank = -1;
  for (int i = 0; i < size_; ++i) {
    if (all[i].value != color) continue;
    if (i == rank_) sub_rank = static_cast<int>(members.size());
    members.push_back(i);
  }
  const int sub_size = static_cast<int>(members.size());
  std::vector<int> names;
  for (int m : members) names.push_back(world_ranks_[m]);
  // Every rank counts splits identically, so the scope is fresh and shared
  // by exactly the ranks of this color.
  std::shared_ptr<RendezvousStore> scoped =
      store_->Scoped(absl::StrCat("split", splits_++, ".color", color));
  std::shared_ptr<gloo::Context> context;
  if (sub_size > 1) {
    absl::StatusOr<std::shared_ptr<gloo::Context>> connected = ConnectFullMesh(
        sub_rank, sub_size, scoped, device_, options_.timeout,
        absl::StrCat("rendezvous of split group color ", color, " (", NameRanks(names), ")"));
    if (!connected.ok()) return Fail(connected.status());
    context = *std::move(connected);
  }
  return std::unique_ptr<GlooGroup>(new GlooGroup(sub_rank, sub_size, std::move(scoped), options_,
                                                  device_, std::move(context), std::move(names)));
}

}  // namespace transport
}  // namespace gradwire
