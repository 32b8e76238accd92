#include "gradwire/transport/sparse_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gloo/common/error.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/ensure_size.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/receive_window.h"

namespace gradwire {
namespace transport {
namespace {

// Slot prefixes of these collectives' messages: GlooGroup's direct
// allgather uses 0x20, Gloo's own algorithms 0x01..0x08 (gloo/types.h).
// A call takes one tag from the group and numbers its steps on top.
constexpr uint8_t kAllreducePrefix = 0x21;
constexpr uint8_t kAlltoallvPrefix = 0x22;
constexpr uint8_t kAllgathervPrefix = 0x23;

using Clock = std::chrono::steady_clock;

Clock::time_point DeadlineAfter(absl::Duration timeout) {
  return Clock::now() +
         std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
}

void WaitRecv(gloo::transport::UnboundBuffer* buffer, Clock::time_point deadline,
              const char* what) {
  if (!buffer->waitRecv(deadline)) throw gloo::IoException(absl::StrCat(what, ": receive aborted"));
}

void WaitSend(gloo::transport::UnboundBuffer* buffer, Clock::time_point deadline,
              const char* what) {
  if (!buffer->waitSend(deadline)) throw gloo::IoException(absl::StrCat(what, ": send aborted"));
}

template <typename T>
void Combine(absl::Span<T> acc, const T* in, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += in[i];
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < acc.size(); ++i) acc[i] = std::min(acc[i], in[i]);
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < acc.size(); ++i) acc[i] = std::max(acc[i], in[i]);
      break;
  }
}

}  // namespace

absl::StatusOr<SparseCollectives::Call> SparseCollectives::Start(GlooGroup& group, const char* op) {
  GRADWIRE_RETURN_IF_ERROR(group.CheckUsable());
  return Call{&group, op, absl::Now()};
}

absl::Status SparseCollectives::Finish(const Call& call, uint64_t sent, uint64_t received,
                                       absl::Status status, bool poison) {
  GlooGroup& group = *call.group;
  CallStats stats;
  stats.op = call.op;
  stats.bytes_sent = sent;
  stats.bytes_received = received;
  stats.wire_time = absl::Now() - call.start;
  group.last_call_ = stats;
  group.totals_.Add(stats);
  if (status.ok()) return status;
  ++group.totals_.failed_calls;
  return poison ? group.Fail(status) : status;
}

template <typename T>
absl::Status SparseCollectives::Allreduce(GlooGroup& group, absl::Span<T> data, ReduceOp op,
                                          const char* name) {
  GRADWIRE_ASSIGN_OR_RETURN(const Call call, Start(group, name));
  const int p = group.size();
  const int me = group.rank();
  if (p == 1 || data.empty()) return Finish(call, 0, 0, absl::OkStatus(), false);
  const size_t len = data.size();
  const size_t bytes = len * sizeof(T);
  // Direct: reduce-scatter and allgather by concurrent messages, 2 steps.
  const bool direct =
      group.UseDirectAllgather() && bytes >= kHalvingMinBytes && len >= static_cast<size_t>(p);
  const size_t width = (len + p - 1) / p;  // the largest direct chunk
  std::vector<T> in(direct ? std::max(len, (p - 1) * width) : len);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int rem = p - p2;
  const bool halving = UsesHalving(p, bytes) && len >= static_cast<size_t>(p2);
  // Chunk c of the halving schedule: elements [bound(c), bound(c + 1)),
  // at least one each since len >= p2.
  auto bound = [len, p2](int c) { return static_cast<size_t>(uint64_t(c) * len / p2); };
  uint64_t sent = 0, received = 0;
  absl::Status s = CallGloo(name, [&] {
    const Clock::time_point deadline = DeadlineAfter(group.options_.timeout);
    const gloo::Slot slot = gloo::Slot::build(kAllreducePrefix, group.NextTag());
    gloo::Context& context = *group.context_;
    // Sends read `data`; receives land in `in` (to be combined) or, when
    // gathering finished pieces, straight in `data` through a second
    // buffer object (one kind of operation pending per buffer).
    std::unique_ptr<gloo::transport::UnboundBuffer> out_buffer =
        context.createUnboundBuffer(data.data(), bytes);
    std::unique_ptr<gloo::transport::UnboundBuffer> gather_buffer =
        context.createUnboundBuffer(data.data(), bytes);
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buffer =
        context.createUnboundBuffer(in.data(), in.size() * sizeof(T));
    const CloseConnectionsOnThrow close_on_throw(&context);
    uint8_t step = 0;
    auto send = [&](int peer, size_t from, size_t count) {
      out_buffer->send(peer, slot + step, from * sizeof(T), count * sizeof(T));
      sent += count * sizeof(T);
    };
    auto recv = [&](gloo::transport::UnboundBuffer* into, int peer, size_t from, size_t count) {
      into->recv(peer, slot + step, from * sizeof(T), count * sizeof(T));
      received += count * sizeof(T);
    };
    // One step with `peer`: send data[give), receive its data[take) into
    // `into`; when combining, data[take) op= what came.
    auto exchange = [&](int peer, size_t give_from, size_t give_count, size_t take_from,
                        size_t take_count, bool combine) {
      gloo::transport::UnboundBuffer* into = combine ? in_buffer.get() : gather_buffer.get();
      recv(into, peer, take_from, take_count);
      send(peer, give_from, give_count);
      WaitRecv(into, deadline, name);
      WaitSend(out_buffer.get(), deadline, name);
      if (combine) Combine(data.subspan(take_from, take_count), in.data() + take_from, op);
    };
    if (direct) {
      // Chunk c = elements [c len / p, (c + 1) len / p), at least one.
      auto at = [len, p](int c) { return static_cast<size_t>(uint64_t(c) * len / p); };
      auto slot_of = [me](int r) { return r < me ? r : r - 1; };
      const size_t mine = at(me), count = at(me + 1) - mine;
      // Step 1: chunk j to rank j; what comes for mine is combined.
      for (int i = 1; i < p; ++i) {
        const int to = (me + i) % p, from = (me - i + p) % p;
        recv(in_buffer.get(), from, slot_of(from) * width, count);
        send(to, at(to), at(to + 1) - at(to));
      }
      for (int i = 1; i < p; ++i) WaitRecv(in_buffer.get(), deadline, name);
      for (int i = 1; i < p; ++i) WaitSend(out_buffer.get(), deadline, name);
      for (int r = 0; r < p; ++r) {
        if (r != me) Combine(data.subspan(mine, count), in.data() + slot_of(r) * width, op);
      }
      ++step;
      // Step 2: every finished chunk to every rank.
      for (int i = 1; i < p; ++i) {
        const int to = (me + i) % p, from = (me - i + p) % p;
        recv(gather_buffer.get(), from, at(from), at(from + 1) - at(from));
        send(to, mine, count);
      }
      for (int i = 1; i < p; ++i) WaitRecv(gather_buffer.get(), deadline, name);
      for (int i = 1; i < p; ++i) WaitSend(out_buffer.get(), deadline, name);
      return;
    }
    // Fold: of the first 2 * rem ranks, each even one hands its vector to
    // the odd one above it and sits out; p2 ranks remain.
    int virtual_rank = me - rem;
    if (me < 2 * rem) {
      if (me % 2 == 0) {
        send(me + 1, 0, len);
        WaitSend(out_buffer.get(), deadline, name);
        virtual_rank = -1;
      } else {
        recv(in_buffer.get(), me - 1, 0, len);
        WaitRecv(in_buffer.get(), deadline, name);
        Combine(data, in.data(), op);
        virtual_rank = me / 2;
      }
    }
    ++step;
    auto peer_of = [rem](int partner) { return partner < rem ? 2 * partner + 1 : partner + rem; };
    const int vr = virtual_rank;
    int steps = 0;
    for (int mask = 1; mask < p2; mask <<= 1) steps += halving ? 2 : 1;
    if (vr < 0) {
      step += steps;
    } else if (!halving) {
      // Recursive doubling: the whole vector each step.
      for (int mask = 1; mask < p2; mask <<= 1, ++step) {
        exchange(peer_of(vr ^ mask), 0, len, 0, len, /*combine=*/true);
      }
    } else {
      // Reduce-scatter by recursive halving (keep the half of the chunks
      // this rank's bit selects, hand over the other), then allgather by
      // recursive doubling: each step 1/2, 1/4, ... of the vector.
      int lo = 0, hi = p2;
      for (int mask = p2 / 2; mask >= 1; mask >>= 1, ++step) {
        const int mid = (lo + hi) / 2;
        const bool upper = (vr & mask) != 0;
        const int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
        const int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
        exchange(peer_of(vr ^ mask), bound(give_lo), bound(give_hi) - bound(give_lo),
                 bound(keep_lo), bound(keep_hi) - bound(keep_lo), /*combine=*/true);
        lo = keep_lo;
        hi = keep_hi;
      }
      for (int mask = 1; mask < p2; mask <<= 1, ++step) {
        const int other_lo = (vr & mask) ? lo - mask : hi;
        exchange(peer_of(vr ^ mask), bound(lo), bound(hi) - bound(lo), bound(other_lo),
                 bound(other_lo + mask) - bound(other_lo), /*combine=*/false);
        lo = std::min(lo, other_lo);
        hi = std::max(hi, other_lo + mask);
      }
    }
    // Unfold: the folded ranks get the result.
    if (me < 2 * rem) {
      if (me % 2 == 1) {
        send(me - 1, 0, len);
        WaitSend(out_buffer.get(), deadline, name);
      } else {
        recv(gather_buffer.get(), me + 1, 0, len);
        WaitRecv(gather_buffer.get(), deadline, name);
      }
    }
  });
  return Finish(call, sent, received, s, /*poison=*/true);
}

bool SparseCollectives::UsesHalving(int ranks, uint64_t bytes) {
  return ranks >= 8 && bytes >= kHalvingMinBytes;
}

absl::Status SparseCollectives::AllreduceU32(GlooGroup& group, absl::Span<uint32_t> data,
                                             ReduceOp op) {
  return Allreduce(group, data, op, "allreduce_u32 (log rounds)");
}

absl::Status SparseCollectives::AllreduceU64(GlooGroup& group, absl::Span<uint64_t> data,
                                             ReduceOp op) {
  return Allreduce(group, data, op, "allreduce_u64 (log rounds)");
}

absl::Status SparseCollectives::AlltoallvBounded(GlooGroup& group,
                                                 absl::Span<const absl::Span<const uint8_t>> blocks,
                                                 absl::Span<const uint64_t> caps,
                                                 std::vector<uint8_t>* scratch,
                                                 absl::Span<absl::Span<const uint8_t>> received,
                                                 std::optional<int> receive_window) {
  static constexpr char kName[] = "alltoallv (bounded)";
  GRADWIRE_ASSIGN_OR_RETURN(const Call call, Start(group, kName));
  const int p = group.size();
  const int me = group.rank();
  if (blocks.size() != static_cast<size_t>(p) || caps.size() != static_cast<size_t>(p) ||
      received.size() != static_cast<size_t>(p)) {
    return Finish(call, 0, 0,
                  absl::InvalidArgumentError(
                      absl::StrCat(kName, ": ", blocks.size(), " blocks, ", caps.size(),
                                   " caps and ", received.size(), " outputs for ", p, " ranks")),
                  /*poison=*/true);
  }
  uint64_t out_bytes = 0;
  for (int j = 0; j < p; ++j) {
    if (blocks[j].size() > caps[j]) {
      return Finish(call, 0, 0,
                    absl::InvalidArgumentError(absl::StrCat(
                        kName, ": the block for rank ", group.world_ranks()[j], " holds ",
                        blocks[j].size(), " bytes, more than its cap of ", caps[j])),
                    /*poison=*/true);
    }
    if (j != me) out_bytes += kLengthBytes + blocks[j].size();
  }
  received[me] = blocks[me];
  if (p == 1) return Finish(call, 0, 0, absl::OkStatus(), false);
  const uint64_t slot_bytes = kLengthBytes + caps[me];
  const uint64_t in_bytes = (p - 1) * slot_bytes;
  EnsureSize(scratch, in_bytes + out_bytes);
  uint8_t* in = scratch->data();
  uint8_t* out = scratch->data() + in_bytes;
  // Outgoing messages, staggered like GlooGroup's direct allgather: rank
  // r sends first to r + 1, so no rank is everyone's first destination.
  std::vector<uint64_t> offsets(p, 0);
  uint64_t at = 0;
  for (int i = 1; i < p; ++i) {
    const int to = (me + i) % p;
    offsets[to] = at;
    EncodeFixed64(out + at, blocks[to].size());
    if (!blocks[to].empty())
      std::memcpy(out + at + kLengthBytes, blocks[to].data(), blocks[to].size());
    at += kLengthBytes + blocks[to].size();
  }
  auto slot_of = [me](int r) { return r < me ? r : r - 1; };
  uint64_t received_bytes = 0;
  absl::Status s = CallGloo(kName, [&] {
    const Clock::time_point deadline = DeadlineAfter(group.options_.timeout);
    const uint64_t slot = gloo::Slot::build(kAlltoallvPrefix, group.NextTag());
    gloo::Context& context = *group.context_;
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buffer =
        context.createUnboundBuffer(in, in_bytes);
    std::unique_ptr<gloo::transport::UnboundBuffer> out_buffer =
        context.createUnboundBuffer(out, out_bytes);
    const CloseConnectionsOnThrow close_on_throw(&context);
    // The receives through a window (GroupOptions::receive_window;
    // receive_window.h says why): sources r - 1, r - 2, ..., the next
    // posted as each one completes. The sends through a window of the
    // same size: destinations r + 1, r + 2, ..., the next posted as one
    // completes. A send posted early moves its bytes as soon as its
    // receiver posts, beside the sends still draining: with every send
    // posted at once, a receiver that moved on to its next source shared
    // that sender's link with the receiver still waiting on it, and the
    // one-flow-a-link waves of a window of 1 ran at about 70 % of the
    // link (4 hosts, 200 Mbit/s, 5 MB blocks:
    // docs/results/2026-11-28-alltoall-send-window.md).
    // No deadlock: iteration i waits for the i-th receive, whose sender
    // posted that send by its iteration i - window, and then for one send,
    // whose receiver posted that receive by its iteration i - window.
    const ReceiveWindow receives(me, p, receive_window.value_or(group.options_.receive_window),
                                 [](int) { return true; });
    const int window = static_cast<int>(receives.in_flight());
    auto post_send = [&](int i) {
      const int to = (me + i) % p;
      out_buffer->send(to, slot, offsets[to], kLengthBytes + blocks[to].size());
    };
    auto post_receive = [&](int from) {
      in_buffer->recv(from, slot, slot_of(from) * slot_bytes, slot_bytes);
    };
    // Receives first (receive_window.h says why).
    for (int j = 0; j < window; ++j) post_receive(receives.sources()[j]);
    for (int i = 1; i <= window; ++i) post_send(i);
    for (int i = 1; i < p; ++i) {
      WaitRecv(in_buffer.get(), deadline, kName);
      if (const int next = receives.PostAfter(i); next >= 0) post_receive(next);
      WaitSend(out_buffer.get(), deadline, kName);
      if (i + window < p) post_send(i + window);
    }
  });
  if (!s.ok()) return Finish(call, out_bytes, 0, s, /*poison=*/true);
  for (int r = 0; r < p; ++r) {
    if (r == me) continue;
    const uint8_t* message = in + slot_of(r) * slot_bytes;
    const uint64_t length = DecodeFixed64(message);
    if (length > caps[me]) {
      // Gloo refuses a message longer than the posted receive, so only the
      // length field can be wrong: a peer that breaks the protocol.
      s = absl::DataLossError(absl::StrCat(kName, ": rank ", group.world_ranks()[r],
                                           " announced a ", length, "-byte block, over the cap of ",
                                           caps[me]));
      return Finish(call, out_bytes, received_bytes, s, /*poison=*/true);
    }
    received[r] = absl::MakeConstSpan(message + kLengthBytes, length);
    received_bytes += kLengthBytes + length;
  }
  return Finish(call, out_bytes, received_bytes, absl::OkStatus(), false);
}

absl::Status SparseCollectives::AllgathervBounded(GlooGroup& group, absl::Span<const uint8_t> mine,
                                                  absl::Span<const uint64_t> caps,
                                                  uint64_t total_cap, std::vector<uint8_t>* scratch,
                                                  absl::Span<absl::Span<const uint8_t>> received) {
  static constexpr char kName[] = "allgatherv (bounded, Bruck)";
  GRADWIRE_ASSIGN_OR_RETURN(const Call call, Start(group, kName));
  const int p = group.size();
  const int me = group.rank();
  if (caps.size() != static_cast<size_t>(p) || received.size() != static_cast<size_t>(p) ||
      mine.size() > caps[me] || mine.size() > total_cap) {
    return Finish(
        call, 0, 0,
        absl::InvalidArgumentError(absl::StrCat(
            kName, ": ", caps.size(), " caps and ", received.size(), " outputs for ", p,
            " ranks, a block of ", mine.size(), " bytes for a cap of ",
            caps.size() == static_cast<size_t>(p) ? caps[me] : 0, " (total ", total_cap, ")")),
        /*poison=*/true);
  }
  received[me] = mine;
  if (p == 1) return Finish(call, 0, 0, absl::OkStatus(), false);
  // Step s (distance d = 2^s) sends the cnt = min(d, p - d) blocks held,
  // me .. me + cnt - 1, to me - d and receives me + d .. me + d + cnt - 1
  // from me + d. A message: cnt u64 lengths, then the blocks back to back.
  // Every step's receive gets its own area, so the views stay valid.
  auto block_caps = [&](int first, int count) {
    uint64_t sum = 0;
    for (int b = 0; b < count; ++b) sum += caps[(first + b) % p];
    return std::min(sum, total_cap);
  };
  std::vector<uint64_t> area;  // offset of each step's receive area
  uint64_t in_bytes = 0, out_cap = 0;
  for (int d = 1; d < p; d *= 2) {
    const int count = std::min(d, p - d);
    area.push_back(in_bytes);
    in_bytes += kLengthBytes * count + block_caps(me + d, count);
    out_cap = std::max(out_cap, kLengthBytes * count + block_caps(me, count));
  }
  EnsureSize(scratch, in_bytes + out_cap);
  uint8_t* in = scratch->data();
  uint8_t* out = scratch->data() + in_bytes;
  uint64_t sent = 0, received_bytes = 0;
  absl::Status bad;  // a malformed message: a peer broke the protocol
  absl::Status s = CallGloo(kName, [&] {
    const Clock::time_point deadline = DeadlineAfter(group.options_.timeout);
    const gloo::Slot slot = gloo::Slot::build(kAllgathervPrefix, group.NextTag());
    gloo::Context& context = *group.context_;
    std::unique_ptr<gloo::transport::UnboundBuffer> in_buffer =
        context.createUnboundBuffer(in, in_bytes);
    std::unique_ptr<gloo::transport::UnboundBuffer> out_buffer =
        context.createUnboundBuffer(out, std::max<uint64_t>(out_cap, 1));
    const CloseConnectionsOnThrow close_on_throw(&context);
    uint8_t step = 0;
    for (int d = 1; d < p; d *= 2, ++step) {
      const int count = std::min(d, p - d);
      const int to = (me - d + p) % p;
      const int from = (me + d) % p;
      // Pack the blocks held.
      uint64_t at = kLengthBytes * count;
      for (int b = 0; b < count; ++b) {
        const absl::Span<const uint8_t> block = received[(me + b) % p];
        EncodeFixed64(out + kLengthBytes * b, block.size());
        if (!block.empty()) std::memcpy(out + at, block.data(), block.size());
        at += block.size();
      }
      const uint64_t capacity = kLengthBytes * count + block_caps(from, count);
      in_buffer->recv(from, slot + step, area[step], capacity);
      out_buffer->send(to, slot + step, 0, at);
      sent += at;
      WaitRecv(in_buffer.get(), deadline, kName);
      WaitSend(out_buffer.get(), deadline, kName);
      // Unpack: check every length against its cap and the area before a
      // view is made.
      const uint8_t* message = in + area[step];
      uint64_t offset = kLengthBytes * count;
      for (int b = 0; b < count && bad.ok(); ++b) {
        const int owner = (from + b) % p;
        const uint64_t length = DecodeFixed64(message + kLengthBytes * b);
        if (length > caps[owner] || length > capacity - offset) {
          bad = absl::DataLossError(
              absl::StrCat(kName, ": rank ", group.world_ranks()[from], " forwarded a ", length,
                           "-byte block of rank ", group.world_ranks()[owner], ", over its cap of ",
                           caps[owner], " or the message's ", capacity, " bytes"));
          break;
        }
        received[owner] = absl::MakeConstSpan(message + offset, length);
        offset += length;
      }
      received_bytes += offset;
      if (!bad.ok()) return;
    }
  });
  if (s.ok()) s = bad;
  return Finish(call, sent, received_bytes, s, /*poison=*/true);
}

}  // namespace transport
}  // namespace gradwire
