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

// Waits on `cv` until done() or `timeout`. If the timeout passes while
// on_wire() (the comm thread is inside a transport call), waits up to
// another `timeout` for that call to end: every transport call has a
// deadline of its own, and its error says why (which rank did not
// arrive), where ours could only say "not exchanged". Returns done();
// `*late`: the first timeout passed.
template <typename Done, typename OnWire>
bool WaitForVerdict(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                    absl::Duration timeout, Done done, OnWire on_wire, bool* late) {
  *late = !cv.wait_until(lock, DeadlineAfter(timeout), done);
  if (!*late) return true;
  return on_wire() && cv.wait_until(lock, DeadlineAfter(timeout), done);
}

}  // namespace

GradientExchanger::GradientExchanger(std::unique_ptr<Communicator> communicator,
                                     const ExchangerOptions& options)
    : comm_(std::move(communicator)),
      options_(options),
      plan_(comm_->path_rule(), options.bucket_bytes) {}

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
    ex->slots_.push_back(std::make_unique<Communicator::StagedBucket>());
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
  FreeDeviceBuckets();
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
  // At most four spans a bucket (queued, encode, transfer, finish): from
  // the second step on, capacity for all of them.
  timeline_.clear();
  timeline_.reserve(4 * buckets_.size());
  encode_at_ = transfer_at_ = finish_at_ = 0;
  staged_started_ = staged_finished_ = 0;
  span_started_ = false;
  return absl::OkStatus();
}

absl::Status GradientExchanger::EnqueueLocked(Bucket* bucket) {
  if (DeviceGradientsLocked() && !bucket->on_device) {
    if (absl::Status s = PrepareDeviceBucketLocked(bucket); !s.ok()) return s;
  }
  const absl::Time now = absl::Now();
  if (!span_started_) {
    span_start_ = now;
    span_started_ = true;
  }
  timeline_.push_back({bucket->id, PipelineStage::kQueued, now, now});
  bucket->queued = true;
  bucket->staged = !bucket->on_device && comm_->CanStage(bucket->path, bucket->data.size());
  bucket->stage = bucket->staged ? Stage::kEncode : Stage::kTransfer;
  bucket->slot = -1;
  if (bucket->rider != nullptr) bucket->rider->queued = true;  // on its way in these frames
  queue_.push_back(bucket);
  ++in_flight_;
  if (bucket->staged) {
    compute_cv_.notify_one();
  } else {
    comm_cv_.notify_one();
  }
  return absl::OkStatus();
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
  if (absl::Status s = BucketPlan::CheckShape(name, grad.size(), shape); !s.ok()) return s;
  if (!grad.empty()) {  // host or device: one kind per exchanger
    kernels::Location where = kernels::Location::kHost;
    if (absl::Status s = kernels::Locate(grad.data(), &where); !s.ok()) return s;
    if (absl::Status s = CheckLocationLocked(name, where); !s.ok()) return s;
    if (where == kernels::Location::kDevice) {
      if (absl::Status s = device().CheckDeviceRange(grad.data(), grad.size() * sizeof(float));
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("Submit(\"", name, "\"): ", s.message()));
      }
    }
  }
  Bucket* bucket = nullptr;
  uint32_t member = 0;
  bool closes = false;  // first step: the bucket is full enough to go
  if (!plan_.fixed()) {
    absl::StatusOr<Bucket*> b = PlanTensorLocked(name, grad.size(), shape, &member, &closes);
    if (!b.ok()) return PoisonLocked(b.status());
    bucket = *b;
  } else {
    absl::StatusOr<TensorPlace> place = plan_.Expect(next_entry_, name, grad.size());
    if (!place.ok()) {
      const absl::Status& s = place.status();
      return PoisonLocked(absl::Status(s.code(), absl::StrCat("step ", step_, ": ", s.message())));
    }
    bucket = buckets_[place->bucket].get();
    member = place->member;
  }
  ++next_entry_;
  bucket->targets[member] = grad;
  const uint64_t offset = bucket->plan->members[member].offset;
  if (bucket->on_device) {  // later steps; the first copies in when queued
    if (absl::Status s = CopyInDevice(*bucket, member); !s.ok()) return PoisonLocked(s);
  } else if (DeviceGradientsLocked()) {
    // First step: the device bucket is allocated and filled when queued.
  } else if (plan_.fixed()) {
    // A gradient written into its slot (GradientSlot) is already in place.
    if (grad.data() != bucket->data.data() + offset) {
      // The copy is the bulk of Submit: make it off the lock so the worker
      // can start the next queued bucket meanwhile. Safe: this bucket is
      // not queued, so only this call touches its data.
      lock.unlock();
      std::copy(grad.begin(), grad.end(), bucket->data.begin() + offset);
      lock.lock();
    }
  } else {
    std::copy(grad.begin(), grad.end(), bucket->data.begin() + offset);
  }
  ++bucket->filled;
  const BucketTicket ticket{bucket->id, step_};
  if (closes) {
    if (absl::Status s = EnqueueLocked(bucket); !s.ok()) return PoisonLocked(s);
  } else if (plan_.fixed()) {
    if (absl::Status s = EnqueueIfCompleteLocked(bucket); !s.ok()) return PoisonLocked(s);
  }
  return ticket;
}

absl::Status GradientExchanger::EnqueueIfCompleteLocked(Bucket* bucket) {
  auto complete = [](const Bucket* b) { return b->filled == b->plan->members.size(); };
  if (!complete(bucket)) return absl::OkStatus();
  if (bucket->carrier != nullptr) {
    return complete(bucket->carrier) ? EnqueueLocked(bucket->carrier) : absl::OkStatus();
  }
  if (bucket->rider != nullptr && !complete(bucket->rider)) return absl::OkStatus();
  return EnqueueLocked(bucket);
}

absl::Status GradientExchanger::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckHealthyLocked(); !s.ok()) return s;
  if (!step_active_ || flushed_) {
    return absl::FailedPreconditionError("Flush outside a step (call BeginStep, then Submit)");
  }
  if (!plan_.fixed()) {
    // Partly filled buckets go in creation order (the same on every rank,
    // since every rank submitted the same sequence).
    // (A dense tail that rides goes in its carrier's frames.)
    const std::vector<uint32_t> rest = plan_.Fix();
    PairDenseTailLocked(rest);
    for (uint32_t id : rest) {
      if (buckets_[id]->carrier != nullptr) continue;
      if (absl::Status s = EnqueueLocked(buckets_[id].get()); !s.ok()) return PoisonLocked(s);
    }
  } else if (next_entry_ != plan_.tensor_count()) {
    return PoisonLocked(absl::FailedPreconditionError(absl::StrCat(
        "step ", step_, " flushed after ", next_entry_, " tensors, but the bucket plan has ",
        plan_.tensor_count(), ": the missing buckets would never be exchanged")));
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
  bool late = false;
  const bool finished = WaitForVerdict(
      done_cv_, lock, timeout, [&] { return !poison_.ok() || DoneLocked(bucket); },
      [&] { return transfer_at_ > 0 && queue_[transfer_at_ - 1]->stage == Stage::kTransfer; },
      &late);
  step_stats_.wait_time += absl::Now() - start;
  total_stats_.wait_time += absl::Now() - start;
  auto missed = [&] {
    return absl::StrCat("bucket ", ticket.bucket, " of step ", ticket.step,
                        " not exchanged within ", absl::FormatDuration(timeout));
  };
  if (!poison_.ok()) {
    // The failure itself, with its code; past our deadline, the
    // transport's verdict on the call we were waiting for.
    return late ? absl::DeadlineExceededError(absl::StrCat(missed(), ": ", poison_.message()))
                : poison_;
  }
  if (!finished) {
    return absl::DeadlineExceededError(
        absl::StrCat(missed(), bucket.queued ? " (queued or on the wire)"
                                             : " (not yet full: was the step flushed?)"));
  }
  return absl::OkStatus();
}

absl::Status GradientExchanger::WaitAll(absl::Duration timeout) {
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  if (!step_active_ || !flushed_) {
    return absl::FailedPreconditionError("WaitAll before Flush: buckets would never fill");
  }
  bool late = false;
  const bool finished = WaitForVerdict(
      done_cv_, lock, timeout, [&] { return !poison_.ok() || in_flight_ == 0; },
      [&] { return transfer_at_ > 0 && queue_[transfer_at_ - 1]->stage == Stage::kTransfer; },
      &late);
  step_stats_.wait_time += absl::Now() - start;
  total_stats_.wait_time += absl::Now() - start;
  auto missed = [&] {
    return absl::StrCat(in_flight_, " bucket(s) of step ", step_, " not exchanged within ",
                        absl::FormatDuration(timeout));
  };
  if (!poison_.ok()) {
    return late ? absl::DeadlineExceededError(absl::StrCat(missed(), ": ", poison_.message()))
                : poison_;
  }
  if (!finished) return absl::DeadlineExceededError(missed());
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
  const std::vector<BucketMember>& members = bucket.plan->members;
  for (size_t i = 0; i < members.size(); ++i) {
    const BucketMember& m = members[i];
    const absl::Span<float> target = bucket.targets[i];
    if (target.data() == bucket.data.data() + m.offset) continue;  // a slot: in place
    std::copy(bucket.data.begin() + m.offset, bucket.data.begin() + m.offset + m.size,
              target.begin());
  }
}

void GradientExchanger::StageDoneLocked(Bucket* bucket, const absl::Status& s,
                                        const ExchangeStats& cost, PipelineStage stage,
                                        absl::Time start) {
  const absl::Time end = absl::Now();
  timeline_.push_back({bucket->id, stage, start, end});
  step_stats_.Add(cost);
  total_stats_.Add(cost);
  if (!s.ok()) {
    const char* what = stage == PipelineStage::kEncode   ? "encode"
                       : stage == PipelineStage::kFinish ? "decode"
                                                         : "exchange";
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
      if (Bucket* rider = bucket->rider; rider != nullptr) {
        rider->queued = false;
        rider->done_step = step_;
        rider->done_any = true;
      }
      if (--in_flight_ == 0) {
        // The step's span so far: first bucket queued to last written back.
        const absl::Duration span = end - span_start_;
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
    const absl::Time start = absl::Now();

    // Off the lock. The caller does not touch a queued bucket, the comm
    // thread does not touch it in these stages, and the slot is this
    // bucket's alone until (c) ends.
    ExchangeStats cost;
    absl::Status s;
    // A dense rider's data is read by the encode and averaged by the
    // finish, like the bucket's own.
    Bucket* rider = bucket->rider;
    const absl::Span<float> dense =
        rider != nullptr ? absl::MakeSpan(rider->data) : absl::Span<float>();
    if (encode) {
      s = comm_->EncodeStage(bucket->id, step, absl::MakeSpan(bucket->data), dense,
                             *slots_[bucket->slot], &cost);
    } else {
      if (bucket->staged) {
        s = comm_->FinishStage(*slots_[bucket->slot], absl::MakeSpan(bucket->data), dense, &cost);
      }
      if (s.ok()) {
        const absl::Time t0 = absl::Now();
        if (bucket->on_device) {
          s = WriteBackDevice(*bucket);
        } else {
          WriteBack(*bucket);
          if (rider != nullptr) WriteBack(*rider);
        }
        cost.copy_time += absl::Now() - t0;
      }
    }

    lock.lock();
    StageDoneLocked(bucket, s, cost, encode ? PipelineStage::kEncode : PipelineStage::kFinish,
                    start);
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
    const absl::Time start = absl::Now();

    ExchangeStats cost;
    absl::Status s;
    if (bucket->staged) {
      s = comm_->TransferStage(*slots_[bucket->slot], &cost);
    } else {
      // Dense, hierarchical or device: the whole exchange here, in place.
      s = bucket->on_device
              ? comm_->AllreduceMeanOnDevice(bucket->id, step, bucket->Data(), bucket->path,
                                             options_.stream)
              : comm_->AllreduceMean(bucket->id, step, absl::MakeSpan(bucket->data), bucket->path);
      cost = comm_->last_call();
    }

    lock.lock();
    StageDoneLocked(bucket, s, cost,
                    bucket->staged ? PipelineStage::kTransfer : PipelineStage::kExchange, start);
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

std::vector<StageSpan> GradientExchanger::StepTimeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

ExchangeStats GradientExchanger::TotalStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_stats_;
}

}  // namespace gradwire
