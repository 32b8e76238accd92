#include "gradwire/transport/sealed_ring.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "gradwire/base/ensure_size.h"
#include "gradwire/transport/gloo_status.h"

namespace gradwire {
namespace transport {
namespace {

// Slot prefix of our messages (Gloo's algorithms use 0x01..0x08,
// direct_allgather 0x20); the low 24 bits number the call's messages.
constexpr uint8_t kSealedRingSlotPrefix = 0x21;
constexpr uint64_t kMaxMessages = uint64_t{1} << 24;
// Receives posted ahead of the one being processed.
constexpr int64_t kLookahead = 4;

using Clock = std::chrono::steady_clock;

// One ring call. Message m = (t - first) * kmax + j is segment j of ring
// step t; it travels as two Gloo messages, the segment's floats (slot 2m)
// and its trailer (slot 2m + 1), so that segments can be sent from and
// received into the caller's buffer where the ring allows:
//   - this rank's first messages are sealed and sent from `data`;
//   - a partial sum arrives in scratch, gets this rank's elements added
//     there, and moves on from there, resealed;
//   - the last partial sum of chunk r is added into `data` and (allreduce)
//     sealed and sent from there as the allgather's first message;
//   - an allgather segment arrives in `data` and moves on from there with
//     the trailer it came with.
// Segment j's messages take turns in two banks: message (t, j) is handled
// by ops_[bank(t) * kmax + j], a received one by the bank of t + 1 (where
// it moves on from). Before a receive is posted in a bank, the bank's
// previous send (message t - 1) must have left; so is every earlier send
// of the segment, which frees the scratch buffer and the part of `data`
// the first messages were sent from.
class Ring {
 public:
  Ring(const SealedRingArgs& args, RingPhases phases, absl::Span<float> data,
       absl::Span<const uint64_t> counts, std::vector<float>* scratch, SealedRingStats* stats);

  absl::Status Run(const char* what);

 private:
  struct Op {
    std::unique_ptr<gloo::transport::UnboundBuffer> recv, recv_trailer, send, send_trailer;
  };

  int Mod(int64_t x) const { return static_cast<int>(((x % size_) + size_) % size_); }
  // The chunk this rank sends, and receives, at ring step t.
  int SendChunk(int64_t t) const { return Mod(rank_ - 1 - t); }
  int RecvChunk(int64_t t) const { return Mod(rank_ - 2 - t); }
  uint64_t Segments(int c) const { return (counts_[c] + seg_ - 1) / seg_; }
  uint64_t SegmentElements(int c, uint64_t j) const {
    return std::min(seg_, counts_[c] - j * seg_);
  }
  uint64_t SegmentOffset(int c, uint64_t j) const { return offsets_[c] + j * seg_; }
  bool PartialSum(int64_t t) const { return t <= size_ - 2; }
  int64_t Bank(int64_t t) const { return (t - first_step_) % 2; }
  size_t Index(int64_t bank, uint64_t j) const { return bank * kmax_ + j; }
  float* Scratch(int64_t bank, uint64_t j) { return scratch_->data() + Index(bank, j) * stride_; }
  uint8_t* Trailer(int64_t bank, uint64_t j) {
    return trailers_.data() + Index(bank, j) * trailer_;
  }
  // Where received message (t, j) lands and moves on from.
  float* Landing(int64_t t, uint64_t j) {
    return PartialSum(t) ? Scratch(Bank(t + 1), j) : data_.data() + SegmentOffset(RecvChunk(t), j);
  }
  uint64_t Slot(int64_t m) const { return slot_base_ + 2 * static_cast<uint64_t>(m); }

  // The context of segment j of chunk c at ring step t, sealed by group
  // rank `sealer`.
  SealedChunkContext Context(int64_t t, int c, uint64_t j, int sealer) const;
  // The authenticator's Seal or Verify of segment `seg` (e elements) and
  // its trailer under `context`, timed.
  absl::Status Authenticate(bool seal, const SealedChunkContext& context, const float* seg,
                            uint64_t e, uint8_t* trailer);
  // false when failure_ is set.
  bool Seal(const SealedChunkContext& context, const float* seg, uint64_t e, uint8_t* trailer);
  bool Verify(const SealedChunkContext& context, const float* seg, uint64_t e, uint8_t* trailer,
              int64_t t);

  // These throw Gloo's exceptions (Run maps them); a false return means
  // failure_ is set.
  void WaitSend(Op& op, Clock::time_point deadline);
  void Send(Op& op, float* seg, uint64_t e, uint8_t* trailer, int64_t m);
  void PostReceives(int64_t upto, Clock::time_point deadline);
  bool SendFirst(int64_t upto);
  bool Process(int64_t m, Clock::time_point deadline);

  const SealedRingArgs& args_;
  gloo::Context* const context_;
  const int rank_;
  const int size_;
  const int next_;
  const int prev_;
  absl::Span<float> data_;
  absl::Span<const uint64_t> counts_;
  std::vector<uint64_t> offsets_;
  std::vector<float>* scratch_;
  SealedRingStats* stats_;
  const size_t trailer_;
  int64_t first_step_ = 0;
  int64_t last_step_ = 0;
  uint64_t seg_ = 1;     // elements per segment
  int64_t kmax_ = 0;     // segments per step (of the largest chunk)
  int64_t total_ = 0;    // messages: steps x kmax_
  uint64_t stride_ = 0;  // floats per scratch buffer
  uint64_t slot_base_ = 0;
  int64_t next_post_ = 0;
  int64_t next_first_ = 0;
  std::vector<Op> ops_;  // per bank and segment
  std::vector<uint8_t> trailers_;
  absl::Status failure_;
};

Ring::Ring(const SealedRingArgs& args, RingPhases phases, absl::Span<float> data,
           absl::Span<const uint64_t> counts, std::vector<float>* scratch, SealedRingStats* stats)
    : args_(args),
      context_(args.context),
      rank_(args.context->rank),
      size_(args.context->size),
      next_((rank_ + 1) % size_),
      prev_((rank_ + size_ - 1) % size_),
      data_(data),
      counts_(counts),
      offsets_(size_ + 1, 0),
      scratch_(scratch),
      stats_(stats),
      trailer_(args.auth != nullptr ? args.auth->trailer_bytes() : 0) {
  for (int c = 0; c < size_; ++c) offsets_[c + 1] = offsets_[c] + counts_[c];
  first_step_ = phases == RingPhases::kAllgather ? size_ - 1 : 0;
  last_step_ = phases == RingPhases::kReduceScatter ? size_ - 2 : 2 * size_ - 3;
  const int64_t steps = last_step_ - first_step_ + 1;
  const uint64_t largest = *std::max_element(counts_.begin(), counts_.end());
  seg_ = std::max<uint64_t>(1, args.segment_bytes / sizeof(float));
  // Every message of the call needs its own two slot numbers.
  const uint64_t per_step = kMaxMessages / (2 * steps);
  seg_ = std::max(seg_, (largest + per_step - 1) / per_step);
  kmax_ = static_cast<int64_t>((largest + seg_ - 1) / seg_);
  total_ = steps * kmax_;
  stride_ = (seg_ + 15) / 16 * 16;  // 64-byte aligned buffers
  slot_base_ = static_cast<uint64_t>(gloo::Slot::build(kSealedRingSlotPrefix, args.call));
}

SealedChunkContext Ring::Context(int64_t t, int c, uint64_t j, int sealer) const {
  SealedChunkContext x;
  x.call = args_.call;
  x.scope = args_.scope;
  x.group_size = static_cast<uint32_t>(size_);
  const bool partial = PartialSum(t);
  x.phase = partial ? SealedChunkContext::kPartialSum : SealedChunkContext::kFinalChunk;
  x.sealer = static_cast<uint32_t>(args_.world_ranks[sealer]);
  x.ring_step = partial ? static_cast<uint32_t>(t) : 0;
  x.chunk = static_cast<uint32_t>(c);
  x.segment = static_cast<uint32_t>(j);
  x.offset = SegmentOffset(c, j);
  x.elements = SegmentElements(c, j);
  return x;
}

absl::Status Ring::Authenticate(bool seal, const SealedChunkContext& context, const float* seg,
                                uint64_t e, uint8_t* trailer) {
  uint8_t bytes[SealedChunkContext::kBytes];
  context.EncodeTo(bytes);
  const absl::Span<const uint8_t> chunk(reinterpret_cast<const uint8_t*>(seg), e * sizeof(float));
  const absl::Time t0 = absl::Now();
  absl::Status s =
      seal ? args_.auth->Seal(bytes, chunk, trailer) : args_.auth->Verify(bytes, chunk, trailer);
  stats_->auth_time += absl::Now() - t0;
  return s;
}

bool Ring::Seal(const SealedChunkContext& context, const float* seg, uint64_t e, uint8_t* trailer) {
  if (args_.auth == nullptr) return true;
  failure_ = Authenticate(/*seal=*/true, context, seg, e, trailer);
  return failure_.ok();
}

bool Ring::Verify(const SealedChunkContext& context, const float* seg, uint64_t e, uint8_t* trailer,
                  int64_t t) {
  if (args_.auth == nullptr) return true;
  const absl::Status s = Authenticate(/*seal=*/false, context, seg, e, trailer);
  if (s.ok()) return true;
  const int from = args_.world_ranks[prev_];
  const std::string where =
      PartialSum(t) ? absl::StrCat("the partial sum from rank ", from, " (ring step ", t)
                    : absl::StrCat("chunk ", context.chunk, " of rank ", context.sealer,
                                   " as forwarded by rank ", from, " (ring step ", t);
  failure_ =
      absl::UnauthenticatedError(absl::StrCat(where, ", segment ", context.segment, ", ", e,
                                              " elements) failed authentication: ", s.message()));
  return false;
}

void Ring::WaitSend(Op& op, Clock::time_point deadline) {
  // Gloo throws IoException on a timeout or a dead peer; false means the
  // wait was aborted.
  for (auto* send : {&op.send, &op.send_trailer}) {
    if (*send == nullptr) continue;
    if (!(*send)->waitSend(nullptr, GlooTimeoutUntil(deadline))) {
      throw gloo::IoException("sealed ring: send aborted");
    }
    send->reset();
  }
}

void Ring::Send(Op& op, float* seg, uint64_t e, uint8_t* trailer, int64_t m) {
  op.send = context_->createUnboundBuffer(seg, e * sizeof(float));
  op.send->send(next_, Slot(m));
  if (trailer_ > 0) {
    op.send_trailer = context_->createUnboundBuffer(trailer, trailer_);
    op.send_trailer->send(next_, Slot(m) + 1);
  }
  stats_->bytes_sent += e * sizeof(float) + trailer_;
}

void Ring::PostReceives(int64_t upto, Clock::time_point deadline) {
  for (; next_post_ < total_ && next_post_ <= upto; ++next_post_) {
    const int64_t t = first_step_ + next_post_ / kmax_;
    const uint64_t j = next_post_ % kmax_;
    const int c = RecvChunk(t);
    if (j >= Segments(c)) continue;
    Op& op = ops_[Index(Bank(t + 1), j)];
    WaitSend(op, deadline);  // message (t - 1, j), and with it every earlier one, has left
    op.recv = context_->createUnboundBuffer(Landing(t, j), SegmentElements(c, j) * sizeof(float));
    op.recv->recv(prev_, Slot(next_post_));
    if (trailer_ > 0) {
      op.recv_trailer = context_->createUnboundBuffer(Trailer(Bank(t + 1), j), trailer_);
      op.recv_trailer->recv(prev_, Slot(next_post_) + 1);
    }
  }
}

bool Ring::SendFirst(int64_t upto) {
  const int c = SendChunk(first_step_);
  const int64_t n = static_cast<int64_t>(Segments(c));
  for (; next_first_ < n && next_first_ <= upto; ++next_first_) {
    const uint64_t j = static_cast<uint64_t>(next_first_);
    float* seg = data_.data() + SegmentOffset(c, j);
    const uint64_t e = SegmentElements(c, j);
    uint8_t* trailer = Trailer(Bank(first_step_), j);
    if (!Seal(Context(first_step_, c, j, rank_), seg, e, trailer)) return false;
    Send(ops_[Index(Bank(first_step_), j)], seg, e, trailer, next_first_);
  }
  return true;
}

bool Ring::Process(int64_t m, Clock::time_point deadline) {
  const int64_t t = first_step_ + m / kmax_;
  const uint64_t j = m % kmax_;
  const int c = RecvChunk(t);
  if (j >= Segments(c)) return true;
  Op& op = ops_[Index(Bank(t + 1), j)];
  for (auto* recv : {&op.recv, &op.recv_trailer}) {
    if (*recv == nullptr) continue;
    if (!(*recv)->waitRecv(nullptr, GlooTimeoutUntil(deadline))) {
      throw gloo::IoException("sealed ring: receive aborted");
    }
    recv->reset();
  }
  const uint64_t e = SegmentElements(c, j);
  stats_->bytes_received += e * sizeof(float) + trailer_;
  float* seg = Landing(t, j);
  uint8_t* trailer = Trailer(Bank(t + 1), j);
  float* out = data_.data() + SegmentOffset(c, j);
  const bool forward = t < last_step_;
  if (PartialSum(t)) {
    if (!Verify(Context(t, c, j, prev_), seg, e, trailer, t)) return false;
    // (sum so far) + mine: the fixed order the header documents. The last
    // step's sum is chunk r's (c == rank_): it goes into `data` and on
    // from there.
    if (t == size_ - 2) {
      for (uint64_t i = 0; i < e; ++i) out[i] += seg[i];
      seg = out;
    } else {
      for (uint64_t i = 0; i < e; ++i) seg[i] += out[i];
    }
    // Onward as this rank's own message of step t + 1: the next partial
    // sum, or (after the last reduce-scatter step) the finished chunk.
    if (forward && !Seal(Context(t + 1, c, j, rank_), seg, e, trailer)) return false;
  } else if (!Verify(Context(t, c, j, c), seg, e, trailer, t)) {
    return false;
  }
  // An allgather segment goes on as it came, its owner's trailer intact.
  if (forward) Send(op, seg, e, trailer, m + kmax_);
  return true;
}

absl::Status Ring::Run(const char* what) {
  if (kmax_ == 0) return absl::OkStatus();  // nothing to move anywhere
  // Partial sums land in scratch; an allgather alone needs none.
  const size_t need = PartialSum(first_step_) ? 2 * kmax_ * stride_ : 0;
  EnsureSize(scratch_, need);
  ops_.resize(2 * kmax_);
  trailers_.resize(2 * kmax_ * trailer_);
  const Clock::time_point deadline = Clock::now() + GlooTimeout(args_.timeout);
  absl::Status status = CallGloo(what, [&] {
    // A receive goes into the bank of message (t - 1, j), once that has
    // left, and message (t - 2, j) was received there: so no further
    // ahead than 2 kmax - 1, and after the first messages are out.
    const int64_t ahead = std::min<int64_t>(kLookahead, 2 * kmax_ - 1);
    for (int64_t m = 0; m < total_; ++m) {
      if (!SendFirst(m + ahead)) return;
      PostReceives(m + ahead, deadline);
      if (!Process(m, deadline)) return;
    }
    for (Op& op : ops_) WaitSend(op, deadline);
  });
  if (!status.ok() || !failure_.ok()) {
    // Operations may still be posted: receives into trailers_, scratch or
    // data, sends from them. This ring's buffers go when it returns, and
    // Gloo's loop thread may be reading into one at that moment (TSan saw
    // it, after a forged chunk). Closing the connections takes each pair's
    // lock, so it waits out a read in progress, and no pair reads after.
    CloseConnections(context_);
  }
  if (!status.ok()) return status;
  if (!failure_.ok()) {
    return absl::Status(failure_.code(), absl::StrCat(what, ": ", failure_.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SealedRing(const SealedRingArgs& args, RingPhases phases, absl::Span<float> data,
                        absl::Span<const uint64_t> counts, std::vector<float>* scratch,
                        SealedRingStats* stats) {
  const std::string what = absl::StrCat(phases == RingPhases::kReduceScatter ? "reduce_scatter"
                                        : phases == RingPhases::kAllgather   ? "allgather"
                                                                             : "allreduce",
                                        args.auth != nullptr ? " (sealed ring)" : " (ring)");
  Ring ring(args, phases, data, counts, scratch, stats);
  return ring.Run(what.c_str());
}

}  // namespace transport
}  // namespace gradwire
