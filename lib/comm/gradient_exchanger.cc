#include "gradwire/lib/comm/gradient_exchanger.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gradwire {
namespace {

// How often an idle pipeline thread re-checks for shutdown even without a
// notification: every wait has a deadline, including the idle one.
constexpr std::chrono::milliseconds kIdlePoll(500);

std::chrono::steady_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
}

}  // namespace

GradientExchanger::GradientExchanger(std::unique_ptr<Communicator> communicator,
                                     const ExchangerOptions& options)
    : comm_(std::move(communicator)), options_(options) {}

absl::StatusOr<std::unique_ptr<GradientExchanger>> GradientExchanger::Create(
    std::unique_ptr<Communicator> communicator, const ExchangerOptions& options) {
  if (communicator == nullptr) {
    return absl::InvalidArgumentError("GradientExchanger::Create: no communicator");
  }
  if (options.bucket_bytes == 0) {
    return absl::InvalidArgumentError("bucket size must be positive (--bucket_size_mb)");
  }
  if (options.pipeline_depth < 1 || options.pipeline_depth > 64) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline depth must be in 1..64, got ",
                                                   options.pipeline_depth, " (--pipeline_depth)"));
  }
  if (absl::Status h = communicator->health(); !h.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("communicator already poisoned: ", h.ToString()));
  }
  std::unique_ptr<GradientExchanger> ex(new GradientExchanger(std::move(communicator), options));
  for (int i = 0; i < options.pipeline_depth; ++i) {
    ex->slots_.push_back(std::make_unique<SparseAllgather::InFlight>());
  }
  ex->compute_thread_ = std::thread([raw = ex.get()] { raw->ComputeLoop(); });
  ex->comm_thread_ = std::thread([raw = ex.get()] { raw->CommLoop(); });
  return ex;
}

GradientExchanger::~GradientExchanger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  compute_cv_.notify_all();
  comm_cv_.notify_all();
  if (compute_thread_.joinable()) compute_thread_.join();
  if (comm_thread_.joinable()) comm_thread_.join();
}

absl::Status GradientExchanger::PoisonLocked(absl::Status status) {
  if (poison_.ok()) poison_ = status;
  done_cv_.notify_all();
  return status;
}

absl::Status GradientExchanger::CheckHealthyLocked() const {
  if (poison_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("gradient exchanger poisoned by earlier failure: ", poison_.ToString()));
}

absl::Status GradientExchanger::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return poison_;
}

absl::Status GradientExchanger::BeginStep(uint64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (in_flight_ > 0) {
    return absl::FailedPreconditionError(absl::StrCat("step ", step, " begun while ", in_flight_,
                                                      " bucket(s) of step ", step_,
                                                      " are still in flight: wait for them first"));
  }
  if (step_active_ && !flushed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, " begun before step ", step_, " was flushed"));
  }
  if (any_step_ && step <= step_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, " is not after the previous step ", step_,
        ": frames are bound to their step, a repeated step would be refused as a replay"));
  }
  step_ = step;
  any_step_ = true;
  step_active_ = true;
  flushed_ = false;
  next_entry_ = 0;
  step_stats_ = ExchangeStats();
  for (auto& b : buckets_) {
    b->filled = 0;
    b->queued = false;
  }
  // Nothing is in flight: the pipeline starts the step empty. clear()
  // keeps the capacity, so later steps do not allocate.
  queue_.clear();
  encode_at_ = transfer_at_ = finish_at_ = 0;
  staged_started_ = staged_finished_ = 0;
  span_started_ = false;
  return absl::OkStatus();
}

void GradientExchanger::EnqueueLocked(Bucket* bucket) {
  if (!span_started_) {
    span_start_ = absl::Now();
    span_started_ = true;
  }
  bucket->queued = true;
  bucket->staged = comm_->CanStage(bucket->path, bucket->data.size());
  bucket->stage = bucket->staged ? Stage::kEncode : Stage::kTransfer;
  bucket->slot = -1;
  queue_.push_back(bucket);
  ++in_flight_;
  if (bucket->staged) {
    compute_cv_.notify_one();
  } else {
    comm_cv_.notify_one();
  }
}

absl::StatusOr<GradientExchanger::Bucket*> GradientExchanger::PlanTensorLocked(
    absl::string_view name, uint64_t size, ExchangePath path) {
  Bucket*& open = open_[path == ExchangePath::kDense ? 0 : 1];
  if (open == nullptr) {
    if (buckets_.size() >= UINT32_MAX) return absl::ResourceExhaustedError("too many buckets");
    buckets_.push_back(std::make_unique<Bucket>());
    open = buckets_.back().get();
    open->id = static_cast<uint32_t>(buckets_.size() - 1);
    open->path = path;
  }
  Member m;
  m.name = std::string(name);
  m.offset = open->data.size();
  m.size = size;
  open->members.push_back(std::move(m));
  open->data.resize(open->data.size() + size);
  plan_.push_back(PlanEntry{open, open->members.size() - 1});
  return open;
}

absl::StatusOr<absl::Span<float>> GradientExchanger::GradientSlot(absl::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_fixed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GradientSlot(\"", name, "\"): slots exist once the first step fixed the bucket plan"));
  }
  for (const PlanEntry& e : plan_) {
    Member& m = e.bucket->members[e.member];
    if (m.name == name) return absl::MakeSpan(e.bucket->data.data() + m.offset, m.size);
  }
  return absl::NotFoundError(
      absl::StrCat("GradientSlot(\"", name, "\"): no tensor of that name in the bucket plan"));
}

absl::StatusOr<BucketTicket> GradientExchanger::Submit(absl::string_view name,
                                                       absl::Span<float> grad,
                                                       absl::Span<const int64_t> shape) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (!step_active_ || flushed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Submit(\"", name, "\") outside a step: call BeginStep first (and not after Flush)"));
  }
  if (!shape.empty()) {
    uint64_t product = 1;
    for (int64_t d : shape) product *= d < 0 ? 0 : static_cast<uint64_t>(d);
    if (product != grad.size()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" has ", grad.size(),
                                                     " elements but its shape holds ", product));
    }
  }
  Bucket* bucket = nullptr;
  Member* member = nullptr;
  if (!plan_fixed_) {
    const ExchangePath path = comm_->PathFor(grad.size(), shape.size() == 1);
    absl::StatusOr<Bucket*> b = PlanTensorLocked(name, grad.size(), path);
    if (!b.ok()) return PoisonLocked(b.status());
    bucket = *b;
    member = &bucket->members.back();
  } else {
    if (next_entry_ >= plan_.size()) {
      return PoisonLocked(absl::FailedPreconditionError(
          absl::StrCat("step ", step_, ": tensor \"", name, "\" is number ", next_entry_ + 1,
                       " but the bucket plan fixed at the first step has only ", plan_.size(),
                       ": submit the same tensors in the same order every step")));
    }
    const PlanEntry& e = plan_[next_entry_];
    bucket = e.bucket;
    member = &bucket->members[e.member];
    if (member->name != name || member->size != grad.size()) {
      return PoisonLocked(absl::FailedPreconditionError(absl::StrCat(
          "step ", step_, ": tensor number ", next_entry_ + 1, " is \"", name, "\" with ",
          grad.size(), " elements, but the bucket plan fixed at the first step expects \"",
          member->name, "\" with ", member->size,
          ": submit the same tensors in the same order every step")));
    }
  }
  ++next_entry_;
  member->target = grad;
  if (plan_fixed_) {
    // A gradient written into its slot (GradientSlot) is already in place.
    if (grad.data() != bucket->data.data() + member->offset) {
      // The copy is the bulk of Submit: make it off the lock so the worker
      // can start the next queued bucket meanwhile. Safe: this bucket is
      // not queued, so only this call touches its data.
      lock.unlock();
      std::copy(grad.begin(), grad.end(), bucket->data.begin() + member->offset);
      lock.lock();
    }
  } else {
    std::copy(grad.begin(), grad.end(), bucket->data.begin() + member->offset);
  }
  ++bucket->filled;
  const BucketTicket ticket{bucket->id, step_};
  if (!plan_fixed_) {
    // First step: close the bucket once it is full enough.
    if (bucket->data.size() * sizeof(float) >= options_.bucket_bytes) {
      open_[bucket->path == ExchangePath::kDense ? 0 : 1] = nullptr;
      EnqueueLocked(bucket);
    }
  } else if (bucket->filled == bucket->members.size()) {
    EnqueueLocked(bucket);
  }
  return ticket;
}

absl::Status GradientExchanger::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (!step_active_ || flushed_) {
    return absl::FailedPreconditionError("Flush outside a step (call BeginStep, then Submit)");
  }
  if (!plan_fixed_) {
    // Close partly filled buckets in creation order (the same on every
    // rank, since every rank submitted the same sequence).
    std::vector<Bucket*> open;
    for (Bucket*& b : open_) {
      if (b != nullptr) open.push_back(b);
      b = nullptr;
    }
    std::sort(open.begin(), open.end(), [](Bucket* a, Bucket* b) { return a->id < b->id; });
    for (Bucket* b : open) EnqueueLocked(b);
    plan_fixed_ = true;
  } else if (next_entry_ != plan_.size()) {
    return PoisonLocked(absl::FailedPreconditionError(absl::StrCat(
        "step ", step_, " flushed after ", next_entry_, " tensors, but the bucket plan has ",
        plan_.size(), ": the missing buckets would never be exchanged")));
  }
  flushed_ = true;
  return absl::OkStatus();
}

bool GradientExchanger::DoneLocked(const Bucket& bucket) const {
  return bucket.done_any && bucket.done_step == step_ && !bucket.queued;
}

absl::Status GradientExchanger::Wait(const BucketTicket& ticket, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  if (ticket.bucket >= buckets_.size() || ticket.step != step_ || !step_active_) {
    return absl::InvalidArgumentError(absl::StrCat("no bucket ", ticket.bucket, " in step ",
                                                   ticket.step, " (current step ", step_, ")"));
  }
  const Bucket& bucket = *buckets_[ticket.bucket];
  const bool finished = done_cv_.wait_until(lock, DeadlineAfter(timeout),
                                            [&] { return !poison_.ok() || DoneLocked(bucket); });
  step_stats_.wait_time += absl::Now() - start;
  total_stats_.wait_time += absl::Now() - start;
  if (!poison_.ok()) return poison_;  // the failure itself, with its code
  if (!finished) {
    return absl::DeadlineExceededError(absl::StrCat(
        "bucket ", ticket.bucket, " of step ", ticket.step, " not exchanged within ",
        absl::FormatDuration(timeout),
        bucket.queued ? " (queued or on the wire)" : " (not yet full: was the step flushed?)"));
  }
  return absl::OkStatus();
}

absl::Status GradientExchanger::WaitAll(absl::Duration timeout) {
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  if (!step_active_ || !flushed_) {
    return absl::FailedPreconditionError("WaitAll before Flush: buckets would never fill");
  }
  const bool finished = done_cv_.wait_until(lock, DeadlineAfter(timeout),
                                            [&] { return !poison_.ok() || in_flight_ == 0; });
  step_stats_.wait_time += absl::Now() - start;
  total_stats_.wait_time += absl::Now() - start;
  if (!poison_.ok()) return poison_;
  if (!finished) {
    return absl::DeadlineExceededError(absl::StrCat(in_flight_, " bucket(s) of step ", step_,
                                                    " not exchanged within ",
                                                    absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

GradientExchanger::Bucket* GradientExchanger::NextComputeJobLocked() {
  if (!poison_.ok()) return nullptr;  // a failed step goes no further
  // Unstaged buckets (dense, hierarchical) skip stage (a).
  while (encode_at_ < queue_.size() && !queue_[encode_at_]->staged) ++encode_at_;
  const uint64_t depth = static_cast<uint64_t>(options_.pipeline_depth);
  if (encode_at_ < queue_.size() && staged_started_ - staged_finished_ < depth) {
    Bucket* b = queue_[encode_at_++];
    // Round robin is safe: stage (c) finishes staged buckets in order, so
    // the previous user of this slot (staged bucket number started - depth)
    // is done once fewer than `depth` are in flight.
    b->slot = static_cast<int>(staged_started_++ % depth);
    return b;
  }
  if (finish_at_ < queue_.size() && queue_[finish_at_]->stage == Stage::kFinish) {
    return queue_[finish_at_++];
  }
  return nullptr;
}

void GradientExchanger::WriteBack(const Bucket& bucket) {
  for (const Member& m : bucket.members) {
    if (m.target.data() == bucket.data.data() + m.offset) continue;  // a slot: in place
    std::copy(bucket.data.begin() + m.offset, bucket.data.begin() + m.offset + m.size,
              m.target.begin());
  }
}

void GradientExchanger::StageDoneLocked(Bucket* bucket, const absl::Status& s,
                                        const ExchangeStats& cost, const char* what) {
  step_stats_.Add(cost);
  total_stats_.Add(cost);
  if (!s.ok()) {
    (void)PoisonLocked(absl::Status(s.code(), absl::StrCat("bucket ", bucket->id, " of step ",
                                                           step_, " (", what, "): ", s.message())));
    return;  // the bucket stays where it is; the pipeline stops here
  }
  switch (bucket->stage) {
    case Stage::kEncode:
      bucket->stage = Stage::kTransfer;
      comm_cv_.notify_one();
      break;
    case Stage::kTransfer:
      bucket->stage = Stage::kFinish;
      compute_cv_.notify_one();
      break;
    case Stage::kFinish:
    case Stage::kDone:
      bucket->stage = Stage::kDone;
      bucket->queued = false;
      bucket->done_step = step_;
      bucket->done_any = true;
      if (bucket->staged) ++staged_finished_;  // frees its slot
      if (--in_flight_ == 0) {
        // The step's span so far: first bucket queued to last written back.
        const absl::Duration span = absl::Now() - span_start_;
        total_stats_.span_time += span - step_stats_.span_time;
        step_stats_.span_time = span;
      }
      done_cv_.notify_all();
      break;
  }
}

// Stages (a) and (c): CPU only, never the transport. The step cannot
// change under a running stage (BeginStep needs nothing in flight), so
// step_ is read under the lock and used off it.
void GradientExchanger::ComputeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Bucket* bucket = nullptr;
    compute_cv_.wait_for(lock, kIdlePoll,
                         [&] { return stop_ || (bucket = NextComputeJobLocked()) != nullptr; });
    if (stop_) return;
    if (bucket == nullptr) continue;
    const uint64_t step = step_;
    const bool encode = bucket->stage == Stage::kEncode;
    lock.unlock();

    // Off the lock. The caller does not touch a queued bucket, the comm
    // thread does not touch it in these stages, and the slot is this
    // bucket's alone until (c) ends.
    ExchangeStats cost;
    absl::Status s;
    if (encode) {
      s = comm_->EncodeStage(bucket->id, step, bucket->data, *slots_[bucket->slot], &cost);
    } else {
      if (bucket->staged) {
        s = comm_->FinishStage(*slots_[bucket->slot], absl::MakeSpan(bucket->data), &cost);
      }
      if (s.ok()) {
        const absl::Time t0 = absl::Now();
        WriteBack(*bucket);
        cost.copy_time += absl::Now() - t0;
      }
    }

    lock.lock();
    StageDoneLocked(bucket, s, cost, encode ? "encode" : "decode");
  }
}

// Stage (b): the only thread that uses the transport, in queue order
// (the same on every rank), which Gloo's ordering rules require.
void GradientExchanger::CommLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    comm_cv_.wait_for(lock, kIdlePoll, [&] {
      return stop_ || (poison_.ok() && transfer_at_ < queue_.size() &&
                       queue_[transfer_at_]->stage == Stage::kTransfer);
    });
    if (stop_) return;
    if (!poison_.ok() || transfer_at_ >= queue_.size() ||
        queue_[transfer_at_]->stage != Stage::kTransfer) {
      continue;
    }
    Bucket* bucket = queue_[transfer_at_++];
    const uint64_t step = step_;
    lock.unlock();

    ExchangeStats cost;
    absl::Status s;
    if (bucket->staged) {
      s = comm_->TransferStage(*slots_[bucket->slot], &cost);
    } else {
      // Dense or hierarchical: the whole exchange here, in place.
      s = comm_->AllreduceMean(bucket->id, step, absl::MakeSpan(bucket->data), bucket->path);
      cost = comm_->last_call();
    }

    lock.lock();
    StageDoneLocked(bucket, s, cost, "exchange");
  }
}

absl::Status GradientExchanger::WaitIdleLocked(std::unique_lock<std::mutex>& lock,
                                              absl::Duration timeout, const char* what) {
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (!done_cv_.wait_until(lock, DeadlineAfter(timeout),
                           [&] { return !poison_.ok() || in_flight_ == 0; })) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": ", in_flight_,
                                                    " bucket(s) still in flight after ",
                                                    absl::FormatDuration(timeout)));
  }
  return CheckHealthyLocked();
}

absl::Status GradientExchanger::Barrier(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = WaitIdleLocked(lock, timeout, "Barrier"); !s.ok()) return s;
  // Idle pipeline (in_flight_ == 0 under the lock): the communicator is
  // ours until the lock is released, as in Close.
  absl::Status s = comm_->Barrier();
  if (!s.ok()) return PoisonLocked(s);
  return s;
}

absl::Status GradientExchanger::Close(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = WaitIdleLocked(lock, timeout, "Close"); !s.ok()) return s;
  // The pipeline is idle (in_flight_ == 0 under the lock) and takes no
  // new bucket once poisoned below, so the communicator is ours to close.
  absl::Status s = comm_->Close();
  (void)PoisonLocked(s.ok() ? absl::FailedPreconditionError("gradient exchanger was closed") : s);
  return s;
}

absl::StatusOr<std::string> GradientExchanger::SaveState() {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (in_flight_ > 0) {
    return absl::FailedPreconditionError("SaveState while buckets are in flight: WaitAll first");
  }
  return comm_->SaveState();
}

absl::Status GradientExchanger::RestoreState(absl::string_view state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (in_flight_ > 0) {
    return absl::FailedPreconditionError("RestoreState while buckets are in flight: WaitAll first");
  }
  return comm_->RestoreState(state);
}

ExchangeStats GradientExchanger::StepStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_stats_;
}

ExchangeStats GradientExchanger::TotalStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_stats_;
}

size_t GradientExchanger::bucket_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_fixed_ ? buckets_.size() : 0;
}

std::vector<BucketInfo> GradientExchanger::Plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BucketInfo> out;
  if (!plan_fixed_) return out;
  for (const auto& b : buckets_) {
    BucketInfo info;
    info.id = b->id;
    info.path = b->path;
    info.elements = b->data.size();
    for (const Member& m : b->members) info.tensors.push_back(m.name);
    out.push_back(std::move(info));
  }
  return out;
}

std::string GradientExchanger::DescribePlan() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_fixed_) return "";
  std::string out;
  for (const auto& b : buckets_) {
    absl::StrAppend(&out, "bucket ", b->id, ": ", ExchangePathName(b->path), ", ",
                    b->members.size(), " tensors, ", b->data.size(), " elements\n");
  }
  return out;
}

}  // namespace gradwire
