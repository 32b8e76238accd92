#include "gradwire/transport/gloo_group.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/algorithm.h"
#include "gloo/common/error.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/math.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gradwire/transport/gloo_status.h"

namespace gradwire {
namespace transport {

namespace {

enum Op : uint64_t {
  kAllgatherU64 = 1,
  kAllgatherv,
  kAllgather,
  kAllreduceRing,
  kAllreduceHalvingDoubling,
  kReduceScatter,
  kBarrier,
  kSplit,
  kExpectSame,
};

const char* OpName(uint64_t op) {
  switch (op) {
    case kAllgatherU64:
      return "allgather_u64";
    case kAllgatherv:
      return "allgatherv";
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
  }
  return "unknown";
}

// Slot prefix of DirectAllgatherv's messages; Gloo's own algorithms use
// 0x01..0x08 (gloo/types.h).
constexpr uint8_t kDirectAllgatherSlotPrefix = 0x20;

// Flags in Descriptor::value (for ops whose value is not data).
// kArgsBad: "my arguments were bad": every rank then fails together
// instead of the others waiting for a transfer the bad rank never starts.
// kCached: "I hold a built algorithm for this tensor": reused only if every
// rank does, so all ranks build (and take context slots) in lockstep.
constexpr uint64_t kArgsBad = 1;
constexpr uint64_t kCached = 2;

// FNV-1a over a table of u64: the agreement round compares hashes of
// arguments that must be identical on every rank (size tables, counts).
uint64_t HashTable(absl::Span<const uint64_t> table) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : table) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h ^ table.size();
}

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// "rank 3" or "ranks [0, 2, 5]".
std::string NameRanks(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  return absl::StrCat("ranks [", absl::StrJoin(ranks, ", "), "]");
}

// "rank 3 passes" / "ranks [0, 1] pass".
std::string RanksVerb(const std::vector<int>& ranks, const char* one, const char* many) {
  return absl::StrCat(NameRanks(ranks), " ", ranks.size() == 1 ? one : many);
}

// Gloo's sum for floats, with the signature its options want.
void SumFloats(void* c, const void* a, const void* b, size_t n) { gloo::sum<float>(c, a, b, n); }

// Runs connectFullMesh with a hard deadline. Gloo's TCP pair connect can
// overrun its own timeout: after a stray connection took a listening
// pair, we measured "Connect timeout" only after 5x the configured
// timeout (20 s for 4 s). Rendezvous therefore runs on its own thread;
// if it has not finished by `deadline` the caller gets DeadlineExceeded
// and the thread is abandoned, keeping what it uses alive until Gloo
// gives up on its own.
absl::Status ConnectWithDeadline(std::shared_ptr<gloo::rendezvous::Context> context,
                                 std::shared_ptr<RendezvousStore> store,
                                 std::shared_ptr<gloo::transport::Device> device,
                                 absl::Duration deadline, const std::string& what) {
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, context, store, device, what]() mutable {
    absl::Status s = CallGloo(what, [&] { context->connectFullMesh(*store, device); });
    std::lock_guard<std::mutex> lock(outcome->mu);
    outcome->status = s;
    outcome->done = true;
    outcome->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mu);
  if (!outcome->cv.wait_for(lock, absl::ToChronoMilliseconds(deadline),
                            [&] { return outcome->done; })) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": not connected after ", absl::FormatDuration(deadline),
        " (store timeout + connect timeout); a peer may have died or a stray connection "
        "took its place"));
  }
  return outcome->status;
}

// Gloo's TCP transport writes with writev(2), which raises SIGPIPE when
// the peer has gone; the default action kills the process, so one dead
// rank would take every survivor down with it (measured: survivors exiting
// with signal 13 in the SIGKILL test). Ignore SIGPIPE -- the write then
// fails with EPIPE and becomes an Unavailable status -- but only where it
// still has its default action: a process that installed its own handler
// keeps it.
void IgnoreSigpipeIfDefault() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

// Runs one of Gloo's bound-buffer algorithms (halving-doubling allreduce
// and reduce-scatter). Those use a single member int as both the send and
// the receive buffer of their notification messages, whose value nobody
// reads: ThreadSanitizer reports Gloo's loop thread writing it while the
// caller's writev reads it. Kept out of line so the suppression in
// tests/transport/tsan.supp can name exactly this path.
__attribute__((noinline)) void RunBoundBufferAlgorithm(gloo::Algorithm* algorithm) {
  algorithm->run();
}

// Creates a TCP device, whose constructor starts Gloo's event-loop thread,
// with that thread's nice value raised by `nice` (GroupOptions). A Linux
// thread inherits its creator's nice value, so the device is created by a
// short-lived thread that first raises its own: nothing else changes,
// and raising a nice value needs no privilege. Throws what Gloo throws.
std::shared_ptr<gloo::transport::Device> CreateDeviceWithLoopNice(
    const gloo::transport::tcp::attr& attr, int nice) {
  if (nice == 0) return gloo::transport::tcp::CreateDevice(attr);
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr error;
  std::thread([&] {
    const id_t self = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int current = getpriority(PRIO_PROCESS, self);
    if (errno == 0) setpriority(PRIO_PROCESS, self, std::min(19, current + nice));
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
  return device;
}

}  // namespace

// The fixed-size record every rank contributes to the agreement round.
// Always kDescriptorBytes, so this exchange itself can never mismatch in
// size. An Allgather of at most kInlineAllgatherBytes per rank travels in
// `payload`: one round instead of two, which matters for the small
// per-bucket tables of the compressed exchange (each round is P-1
// sequential messages).
struct GlooGroup::Descriptor {
  uint64_t op = 0;
  uint64_t count = 0;   // elements or bytes this rank passes
  uint64_t shared = 0;  // hash of arguments that must agree across ranks
  uint64_t value = 0;   // op-specific: the u64 being gathered, flags, ...
  uint8_t payload[kInlineAllgatherBytes] = {};
};
static_assert(sizeof(GlooGroup::Descriptor) == 32 + GlooGroup::kInlineAllgatherBytes,
              "descriptor layout");

// Times one collective and books its bytes into the counters.
class GlooGroup::Call {
 public:
  // `agreement_round`: the call exchanges descriptors first (all but
  // AllgathervOfGatheredTable do).
  Call(GlooGroup* group, uint64_t op, bool agreement_round = true)
      : group_(group), start_(absl::Now()) {
    stats_.op = OpName(op);
    // The agreement round is a ring allgather of descriptors.
    const uint64_t round =
        agreement_round ? sizeof(Descriptor) * static_cast<uint64_t>(group->size_ - 1) : 0;
    stats_.bytes_sent = round;
    stats_.bytes_received = round;
    group_->agree_time_ = absl::ZeroDuration();
  }
  void AddBytes(uint64_t sent, uint64_t received) {
    stats_.bytes_sent += sent;
    stats_.bytes_received += received;
  }
  absl::Status Finish(absl::Status status) {
    stats_.wire_time = absl::Now() - start_;
    stats_.agree_time = group_->agree_time_;
    group_->last_call_ = stats_;
    group_->totals_.Add(stats_);
    if (!status.ok()) ++group_->totals_.failed_calls;
    return status;
  }

 private:
  GlooGroup* group_;
  absl::Time start_;
  CallStats stats_;
};

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
  IgnoreSigpipeIfDefault();
  std::shared_ptr<gloo::transport::Device> device;
  absl::Status s = CallGloo(absl::StrCat("creating TCP device on ", options.bind_address), [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.bind_address;
    device = CreateDeviceWithLoopNice(attr, options.event_loop_nice);
  });
  if (!s.ok()) return s;
  std::shared_ptr<gloo::Context> context;
  if (size > 1) {
    auto rendezvous = std::make_shared<gloo::rendezvous::Context>(rank, size);
    rendezvous->setTimeout(ToChrono(options.timeout));
    s = ConnectWithDeadline(
        rendezvous, store, device, store->timeout() + options.timeout,
        absl::StrCat("rendezvous of rank ", rank, " of ", size, " under '", store->prefix(), "'"));
    if (!s.ok()) return s;
    context = rendezvous;
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
  if (context_ != nullptr) {
    (void)CallGloo("closing connections", [&] { context_->closeConnections(); });
  }
  return status;
}

void GlooGroup::DirectAllgatherv(const uint8_t* mine, absl::Span<const uint64_t> sizes,
                                 uint8_t* out) {
  std::vector<uint64_t> offsets(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) offsets[r + 1] = offsets[r] + sizes[r];
  if (sizes[rank_] > 0) std::memcpy(out + offsets[rank_], mine, sizes[rank_]);
  const uint64_t slot = gloo::Slot::build(kDirectAllgatherSlotPrefix, NextTag());
  std::unique_ptr<gloo::transport::UnboundBuffer> send, recv;
  if (sizes[rank_] > 0) {
    send = context_->createUnboundBuffer(const_cast<uint8_t*>(mine), sizes[rank_]);
  }
  if (offsets[size_] > sizes[rank_]) recv = context_->createUnboundBuffer(out, offsets[size_]);
  // Both sides know every size, so a zero-byte block is simply not sent.
  // Peers in staggered order: rank r first sends to r + 1 and receives
  // from r - 1, so no single rank is everyone's first destination.
  int sends = 0, recvs = 0;
  for (int i = 1; i < size_; ++i) {
    const int to = (rank_ + i) % size_;
    const int from = (rank_ - i + size_) % size_;
    if (send != nullptr) {
      send->send(to, slot);
      ++sends;
    }
    if (sizes[from] > 0) {
      recv->recv(from, slot, offsets[from], sizes[from]);
      ++recvs;
    }
  }
  // One deadline for the whole exchange. Gloo throws IoException on a
  // timeout or a dead peer; false means the wait was aborted.
  const auto deadline = std::chrono::steady_clock::now() + ToChrono(options_.timeout);
  for (; recvs > 0; --recvs) {
    if (!recv->waitRecv(deadline)) throw gloo::IoException("direct allgather: receive aborted");
  }
  for (; sends > 0; --sends) {
    if (!send->waitSend(deadline)) throw gloo::IoException("direct allgather: send aborted");
  }
}

absl::Status GlooGroup::Agree(const Descriptor& mine, std::vector<Descriptor>* all) {
  all->assign(size_, Descriptor());
  (*all)[rank_] = mine;
  if (size_ == 1) return absl::OkStatus();
  Descriptor in = mine;
  // Booked on every return: the call's stats split it out of wire time.
  struct Booked {
    absl::Duration* total;
    absl::Time start;
    ~Booked() { *total += absl::Now() - start; }
  } booked{&agree_time_, absl::Now()};
  if (UseDirectAllgather()) {
    const std::vector<uint64_t> sizes(size_, sizeof(Descriptor));
    absl::Status s = CallGloo(absl::StrCat(OpName(mine.op), ": agreement round"), [&] {
      DirectAllgatherv(reinterpret_cast<const uint8_t*>(&in), sizes,
                       reinterpret_cast<uint8_t*>(all->data()));
    });
    return s.ok() ? s : Fail(s);
  }
  absl::Status s = CallGloo(absl::StrCat(OpName(mine.op), ": agreement round"), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(&in, 1);
    opts.setOutput(all->data(), all->size());
    opts.setTag(NextTag());
    opts.setTimeout(ToChrono(options_.timeout));
    gloo::allgather(opts);
  });
  return s.ok() ? s : Fail(s);
}

absl::Status GlooGroup::CheckSame(const std::vector<Descriptor>& all, const char* op,
                                  bool value_is_flags) const {
  // Group ranks by each field; any field with two groups is a mismatch.
  auto split_by = [&](auto field) {
    std::map<uint64_t, std::vector<int>> groups;
    for (int i = 0; i < size_; ++i) groups[field(all[i])].push_back(world_ranks_[i]);
    return groups;
  };
  auto ops = split_by([](const Descriptor& d) { return d.op; });
  if (ops.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [o, ranks] : ops)
      parts.push_back(absl::StrCat(NameRanks(ranks), " called ", OpName(o)));
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch: ", absl::StrJoin(parts, "; ")));
  }
  std::vector<int> bad;
  for (int i = 0; i < size_; ++i) {
    if (value_is_flags && (all[i].value & kArgsBad)) bad.push_back(world_ranks_[i]);
  }
  if (!bad.empty() && value_is_flags) {
    return absl::InvalidArgumentError(absl::StrCat("collective mismatch in ", op, ": ",
                                                   NameRanks(bad), " passed invalid arguments"));
  }
  auto shared = split_by([](const Descriptor& d) { return d.shared; });
  if (shared.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [h, ranks] : shared) parts.push_back(NameRanks(ranks));
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in ", op, ": ranks disagree on shared arguments (",
                     "size table or counts): ", absl::StrJoin(parts, " vs ")));
  }
  return absl::OkStatus();
}

absl::Status GlooGroup::AllgatherU64(uint64_t value, absl::Span<uint64_t> all) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kAllgatherU64);
  Descriptor mine{kAllgatherU64, 1, 0, value};
  std::vector<Descriptor> descriptors;
  if (absl::Status s = Agree(mine, &descriptors); !s.ok()) return call.Finish(s);
  if (absl::Status s = CheckSame(descriptors, OpName(kAllgatherU64), /*value_is_flags=*/false);
      !s.ok()) {
    return call.Finish(s);
  }
  if (all.size() != static_cast<size_t>(size_)) {
    return call.Finish(absl::InvalidArgumentError(
        absl::StrCat("AllgatherU64 output has ", all.size(), " slots for ", size_, " ranks")));
  }
  for (int i = 0; i < size_; ++i) all[i] = descriptors[i].value;
  return call.Finish(absl::OkStatus());
}

absl::Status GlooGroup::ExpectSame(uint64_t value, absl::string_view what) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kExpectSame);
  std::vector<Descriptor> all;
  if (absl::Status s = Agree(Descriptor{kExpectSame, 0, 0, value}, &all); !s.ok()) {
    return call.Finish(s);
  }
  if (absl::Status s = CheckSame(all, OpName(kExpectSame), /*value_is_flags=*/false); !s.ok())
    return call.Finish(s);
  std::map<uint64_t, std::vector<int>> groups;
  for (int i = 0; i < size_; ++i) groups[all[i].value].push_back(world_ranks_[i]);
  if (groups.size() == 1) return call.Finish(absl::OkStatus());
  std::vector<std::string> parts;
  for (const auto& [v, ranks] : groups) {
    parts.push_back(absl::StrCat(RanksVerb(ranks, "has", "have"), " 0x", absl::Hex(v)));
  }
  return call.Finish(absl::InvalidArgumentError(
      absl::StrCat("collective mismatch in ", what, ": ", absl::StrJoin(parts, "; "))));
}

namespace {

// Validates an allgatherv size table against what this rank holds; the
// reason is reported locally, the other ranks learn "invalid arguments".
absl::Status CheckLocalAllgatherv(int rank, int size, absl::Span<const uint8_t> mine,
                                  absl::Span<const uint64_t> sizes, size_t out_size) {
  if (sizes.size() != static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allgatherv: size table has ", sizes.size(), " entries for ", size, " ranks"));
  }
  if (sizes[rank] != mine.size()) {
    return absl::InvalidArgumentError(absl::StrCat("allgatherv: size table says rank ", rank,
                                                   " sends ", sizes[rank], " bytes but it has ",
                                                   mine.size()));
  }
  uint64_t total = 0;
  for (uint64_t s : sizes) {
    if (s > (uint64_t{1} << 62) || total + s < total) {
      return absl::InvalidArgumentError("allgatherv: size table overflows");
    }
    total += s;
  }
  if (total != out_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("allgatherv: output holds ", out_size, " bytes, sizes sum to ", total));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GlooGroup::Allgatherv(absl::Span<const uint8_t> mine, absl::Span<const uint64_t> sizes,
                                   absl::Span<uint8_t> out) {
  return AllgathervImpl(mine, sizes, out, /*agree=*/true);
}

absl::Status GlooGroup::AllgathervOfGatheredTable(absl::Span<const uint8_t> mine,
                                                  absl::Span<const uint64_t> sizes,
                                                  absl::Span<uint8_t> out) {
  return AllgathervImpl(mine, sizes, out, /*agree=*/false);
}

absl::Status GlooGroup::AllgathervImpl(absl::Span<const uint8_t> mine,
                                       absl::Span<const uint64_t> sizes, absl::Span<uint8_t> out,
                                       bool agree) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kAllgatherv, /*agreement_round=*/agree);
  const absl::Status local = CheckLocalAllgatherv(rank_, size_, mine, sizes, out.size());
  if (agree) {
    Descriptor d{kAllgatherv, mine.size(), HashTable(sizes), local.ok() ? 0 : kArgsBad};
    std::vector<Descriptor> all;
    if (absl::Status s = Agree(d, &all); !s.ok()) return call.Finish(s);
    if (!local.ok()) return call.Finish(local);
    if (absl::Status s = CheckSame(all, OpName(kAllgatherv), /*value_is_flags=*/true); !s.ok())
      return call.Finish(s);
  } else {
    // A local error here is a caller bug (the table was not this rank's
    // gathered one): the peers are already posting receives, so the group
    // cannot stay consistent. Poison it; they fail within the timeout.
    if (!local.ok()) return call.Finish(Fail(local));
  }

  // The size table is now known to be identical everywhere: check the cap
  // here, where every rank reaches the same verdict, and before Gloo posts
  // a receive (a receive smaller than the message kills the process).
  std::vector<int> over;
  for (int i = 0; i < size_; ++i) {
    if (sizes[i] > options_.max_bytes_per_rank) over.push_back(world_ranks_[i]);
  }
  if (!over.empty()) {
    return call.Finish(absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in allgatherv: ", NameRanks(over),
                     " would exceed the cap of ", options_.max_bytes_per_rank, " bytes per rank")));
  }
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  if (size_ == 1) {
    if (!mine.empty()) std::memcpy(out.data(), mine.data(), mine.size());
    return call.Finish(absl::OkStatus());
  }
  if (total == 0) return call.Finish(absl::OkStatus());  // nothing moves anywhere
  if (UseDirectAllgatherv(sizes)) {
    // Our block to each of the P - 1 peers; every block but ours in.
    call.AddBytes(sizes[rank_] * (size_ - 1), total - sizes[rank_]);
    absl::Status s =
        CallGloo("allgatherv", [&] { DirectAllgatherv(mine.data(), sizes, out.data()); });
    return call.Finish(s.ok() ? s : Fail(s));
  }
  // The ring forwards every block but the next rank's; receives all but ours.
  call.AddBytes(total - sizes[(rank_ + 1) % size_], total - sizes[rank_]);
  std::vector<size_t> elements(sizes.begin(), sizes.end());
  // Gloo wants a non-null input even for zero bytes.
  static uint8_t empty_byte = 0;
  uint8_t* in = mine.empty() ? &empty_byte : const_cast<uint8_t*>(mine.data());
  absl::Status s = CallGloo("allgatherv", [&] {
    gloo::AllgathervOptions opts(context_);
    opts.setInput(in, mine.size());
    opts.setOutput(out.data(), std::move(elements));
    opts.setTag(NextTag());
    opts.setTimeout(ToChrono(options_.timeout));
    gloo::allgatherv(opts);
  });
  return call.Finish(s.ok() ? s : Fail(s));
}

absl::Status GlooGroup::AllgathervBytes(absl::Span<const uint8_t> mine, uint64_t max_bytes_per_rank,
                                        std::vector<uint8_t>* out, std::vector<uint64_t>* sizes) {
  sizes->assign(size_, 0);
  if (absl::Status s = AllgatherU64(mine.size(), absl::MakeSpan(*sizes)); !s.ok()) return s;
  // Every rank holds the same table, so every rank reaches the same verdict.
  const uint64_t cap = std::min(max_bytes_per_rank, options_.max_bytes_per_rank);
  std::vector<int> over;
  for (int i = 0; i < size_; ++i) {
    if ((*sizes)[i] > cap) over.push_back(world_ranks_[i]);
  }
  if (!over.empty()) {
    std::vector<std::string> parts;
    for (int i = 0; i < size_; ++i) {
      if ((*sizes)[i] > cap)
        parts.push_back(absl::StrCat("rank ", world_ranks_[i], ": ", (*sizes)[i]));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in allgatherv: ", RanksVerb(over, "exceeds", "exceed"),
                     " the cap of ", cap, " bytes per rank (", absl::StrJoin(parts, ", "), ")"));
  }
  uint64_t total = 0;
  for (uint64_t s : *sizes) total += s;
  out->resize(total);
  return Allgatherv(mine, *sizes, absl::MakeSpan(*out));
}

absl::Status GlooGroup::Allgather(absl::Span<const uint8_t> mine, absl::Span<uint8_t> out) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kAllgather);
  absl::Status local = absl::OkStatus();
  if (out.size() != mine.size() * static_cast<size_t>(size_)) {
    local = absl::InvalidArgumentError(absl::StrCat("allgather: output holds ", out.size(),
                                                    " bytes, need ", size_, " x ", mine.size()));
  }
  Descriptor d{kAllgather, mine.size(), mine.size(), local.ok() ? 0 : kArgsBad};
  if (mine.size() <= kInlineAllgatherBytes && !mine.empty()) {
    std::memcpy(d.payload, mine.data(), mine.size());
  }
  std::vector<Descriptor> all;
  if (absl::Status s = Agree(d, &all); !s.ok()) return call.Finish(s);
  if (!local.ok()) return call.Finish(local);
  // `shared` carries the length: differing lengths are a mismatch.
  if (absl::Status s = CheckSame(all, OpName(kAllgather), /*value_is_flags=*/true); !s.ok()) {
    std::map<uint64_t, std::vector<int>> by_len;
    for (int i = 0; i < size_; ++i) by_len[all[i].count].push_back(world_ranks_[i]);
    if (by_len.size() > 1 && absl::StrContains(s.message(), "shared")) {
      std::vector<std::string> parts;
      for (const auto& [n, ranks] : by_len)
        parts.push_back(absl::StrCat(RanksVerb(ranks, "passes", "pass"), " ", n, " bytes"));
      s = absl::InvalidArgumentError(
          absl::StrCat("collective mismatch in allgather: ", absl::StrJoin(parts, "; ")));
    }
    return call.Finish(s);
  }
  if (mine.empty()) return call.Finish(absl::OkStatus());
  if (size_ == 1) {
    std::memcpy(out.data(), mine.data(), mine.size());
    return call.Finish(absl::OkStatus());
  }
  if (mine.size() <= kInlineAllgatherBytes) {
    // The data came with the agreement round.
    for (int i = 0; i < size_; ++i) {
      std::memcpy(out.data() + i * mine.size(), all[i].payload, mine.size());
    }
    return call.Finish(absl::OkStatus());
  }
  call.AddBytes(mine.size() * (size_ - 1), mine.size() * (size_ - 1));
  absl::Status s = CallGloo("allgather", [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<uint8_t*>(mine.data()), mine.size());
    opts.setOutput(out.data(), out.size());
    opts.setTag(NextTag());
    opts.setTimeout(ToChrono(options_.timeout));
    gloo::allgather(opts);
  });
  return call.Finish(s.ok() ? s : Fail(s));
}

absl::Status GlooGroup::AllreduceSum(absl::Span<float> data, AllreduceAlgorithm algorithm) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  const bool ring = algorithm == AllreduceAlgorithm::kRing;
  const uint64_t op = ring ? kAllreduceRing : kAllreduceHalvingDoubling;
  Call call(this, op);
  const uint64_t n = data.size();
  // Gloo's halving-doubling keeps byte counts in int.
  absl::Status local = absl::OkStatus();
  if (!ring && n * sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
    local = absl::InvalidArgumentError(
        absl::StrCat("halving-doubling allreduce is limited to ", INT_MAX / sizeof(float),
                     " elements (Gloo uses int byte counts); use the ring for ", n));
  }
  const CacheKey key{data.data(), n};
  const bool cached = !ring && allreduce_hd_.count(key) > 0;
  // `shared` carries n: every rank must reduce the same length.
  Descriptor d{op, n, n, (local.ok() ? 0 : kArgsBad) | (cached ? kCached : 0)};
  std::vector<Descriptor> all;
  if (absl::Status s = Agree(d, &all); !s.ok()) return call.Finish(s);
  if (!local.ok()) return call.Finish(local);
  if (absl::Status s = CheckSame(all, OpName(op), /*value_is_flags=*/true); !s.ok()) {
    std::map<uint64_t, std::vector<int>> by_len;
    for (int i = 0; i < size_; ++i) by_len[all[i].count].push_back(world_ranks_[i]);
    if (by_len.size() > 1 && absl::StrContains(s.message(), "shared")) {
      std::vector<std::string> parts;
      for (const auto& [len, ranks] : by_len)
        parts.push_back(absl::StrCat(RanksVerb(ranks, "passes", "pass"), " ", len, " elements"));
      s = absl::InvalidArgumentError(
          absl::StrCat("collective mismatch in ", OpName(op), ": ", absl::StrJoin(parts, "; ")));
    }
    return call.Finish(s);
  }
  if (n == 0 || size_ == 1) return call.Finish(absl::OkStatus());
  // Both algorithms move about 2 (P-1)/P of the tensor each way.
  const uint64_t moved = 2 * (size_ - 1) * n * sizeof(float) / size_;
  call.AddBytes(moved, moved);
  absl::Status s;
  if (ring) {
    s = CallGloo("allreduce (ring)", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setOutput(data.data(), n);
      opts.setReduceFunction(&SumFloats);
      opts.setTag(NextTag());
      opts.setTimeout(ToChrono(options_.timeout));
      gloo::allreduce(opts);
    });
  } else {
    bool all_cached = true;
    for (const Descriptor& x : all) all_cached = all_cached && (x.value & kCached);
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
  return call.Finish(s.ok() ? s : Fail(s));
}

absl::Status GlooGroup::ReduceScatterSum(absl::Span<float> data,
                                         absl::Span<const uint64_t> counts) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kReduceScatter);
  const uint64_t n = data.size();
  absl::Status local = absl::OkStatus();
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (counts.size() != static_cast<size_t>(size_) || total != n) {
    local = absl::InvalidArgumentError(absl::StrCat("reduce_scatter: ", counts.size(),
                                                    " counts summing to ", total, " for ", size_,
                                                    " ranks and ", n, " elements"));
  } else if (n * sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
    local = absl::InvalidArgumentError(
        "reduce_scatter is limited to 2^29 elements (Gloo uses int byte counts)");
  }
  const CacheKey key{data.data(), n};
  const uint64_t table = HashTable(counts);
  const bool cached = reduce_scatter_.count({key, table}) > 0;
  Descriptor d{kReduceScatter, n, HashTable(counts) ^ n,
               (local.ok() ? 0 : kArgsBad) | (cached ? kCached : 0)};
  std::vector<Descriptor> all;
  if (absl::Status s = Agree(d, &all); !s.ok()) return call.Finish(s);
  if (!local.ok()) return call.Finish(local);
  if (absl::Status s = CheckSame(all, OpName(kReduceScatter), /*value_is_flags=*/true); !s.ok())
    return call.Finish(s);
  if (n == 0 || size_ == 1) return call.Finish(absl::OkStatus());
  const uint64_t moved = (n - counts[rank_]) * sizeof(float);
  call.AddBytes(moved, moved);
  bool all_cached = true;
  for (const Descriptor& x : all) all_cached = all_cached && (x.value & kCached);
  absl::Status s = CallGloo("reduce_scatter (halving-doubling)", [&] {
    if (!all_cached) {
      if (reduce_scatter_.size() >= 16) reduce_scatter_.clear();
      std::vector<int> recv(counts.begin(), counts.end());
      reduce_scatter_[{key, table}] = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          context_, std::vector<float*>{data.data()}, static_cast<int>(n), recv);
    }
    RunBoundBufferAlgorithm(reduce_scatter_[{key, table}].get());
  });
  return call.Finish(s.ok() ? s : Fail(s));
}

absl::Status GlooGroup::Barrier() {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  Call call(this, kBarrier);
  // The agreement round is itself a barrier: no rank completes an
  // allgather before every rank has contributed.
  std::vector<Descriptor> all;
  if (absl::Status s = Agree(Descriptor{kBarrier, 0, 0, 0}, &all); !s.ok()) {
    return call.Finish(s);
  }
  return call.Finish(CheckSame(all, OpName(kBarrier), /*value_is_flags=*/true));
}

absl::Status GlooGroup::Close() {
  absl::Status s = Barrier();
  if (s.ok()) {
    allreduce_hd_.clear();
    reduce_scatter_.clear();
    if (context_ != nullptr) {
      s = CallGloo("closing connections", [&] { context_->closeConnections(); });
    }
    if (poison_.ok()) poison_ = absl::CancelledError("group was closed");
  }
  return s;
}

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Split(uint32_t color) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  std::vector<Descriptor> all;
  {
    Call call(this, kSplit);
    if (absl::Status s = Agree(Descriptor{kSplit, 0, 0, color}, &all); !s.ok()) {
      return call.Finish(s);
    }
    if (absl::Status s = CheckSame(all, OpName(kSplit), /*value_is_flags=*/false); !s.ok())
      return call.Finish(s);
    (void)call.Finish(absl::OkStatus());
  }
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
    auto rendezvous = std::make_shared<gloo::rendezvous::Context>(sub_rank, sub_size);
    rendezvous->setTimeout(ToChrono(options_.timeout));
    absl::Status s = ConnectWithDeadline(
        rendezvous, scoped, device_, scoped->timeout() + options_.timeout,
        absl::StrCat("rendezvous of split group color ", color, " (", NameRanks(names), ")"));
    if (!s.ok()) return Fail(s);
    context = rendezvous;
  }
  return std::unique_ptr<GlooGroup>(new GlooGroup(sub_rank, sub_size, std::move(scoped), options_,
                                                  device_, std::move(context), std::move(names)));
}

}  // namespace transport
}  // namespace gradwire
