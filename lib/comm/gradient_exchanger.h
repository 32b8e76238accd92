// GradientExchanger: the asynchronous, bucketed exchange a training stack
// drives from backprop.
//
//   auto ex = GradientExchanger::Create(std::move(communicator), {});
//   for (step ...) {
//     ex->BeginStep(step);
//     for each parameter, in the order backprop produces its gradient:
//       tickets.push_back(*ex->Submit(name, grad_span, shape));
//     ex->Flush();                       // end of backprop
//     ex->WaitAll(absl::Seconds(30));    // or Wait(ticket, ...) per bucket
//     // every grad_span now holds the average over ranks
//   }
//
// Submit copies the gradient into a bucket (fusion: one collective per
// ~bucket_bytes instead of one per tensor, like DDP; no copy for a
// gradient written into its GradientSlot) and returns at once;
// a full bucket enters a pipeline of two background threads, which
// exchange it through the Communicator (compressed or dense, see
// communicator.h) while the caller keeps submitting, then write the
// averaged values back into the submitted spans. Spans must stay valid
// until their bucket is waited for.
//
// The pipeline (docs/communicator.md, "Pipelining"): a flat compressed
// bucket goes through three stages, (a) error feedback + encode + sign,
// (b) the collectives, (c) MAC checks + decode + average + write-back.
// The COMM thread owns the transport and runs (b) for every bucket in
// submission order (dense and hierarchical buckets: their whole exchange);
// the COMPUTE thread runs (a) and (c), so bucket i+1 is encoded, and
// bucket i-1 decoded, while bucket i is on the wire. At most
// `pipeline_depth` compressed buckets are between (a) and (c) at once
// (each holds its frames). Results are bit for bit those of running the
// buckets one at a time: the arithmetic of each bucket is unchanged and
// error-feedback residuals are per bucket.
//
// The bucket plan (which tensors share a bucket, each bucket's path;
// bucket_plan.h) is fixed by the first step from the tensors submitted and
// their order, with the communicator's path rule (Communicator::PathFor).
// Later steps must submit the same tensors (names and sizes) in the same
// order; anything else is refused. Every rank must submit the same
// sequence, so buckets are exchanged in the same order everywhere, which
// the single comm thread and Gloo's ordering rules require. Bucket ids
// key the per-bucket error-feedback residuals, saved and restored with
// SaveState / RestoreState (checkpoints).
//
// Failures: any failure (transport, mismatch, MAC, a wrong submission)
// poisons the exchanger. Wait / WaitAll / health() return that failure
// itself (Unavailable for a dead peer, DeadlineExceeded for a stalled one,
// InvalidArgument for a mismatch, ...); BeginStep, Submit, Flush and the
// checkpoint calls return FailedPrecondition quoting it, until the
// exchanger is re-created. A Wait that runs out
// of time returns DeadlineExceeded and poisons nothing (the bucket may
// still finish). Every wait has a deadline.
//
// Device memory (CI runs it on kernels::HostDevice; ran on an H200,
// docs/device_path.md): an exchanger takes gradients of one kind, host or
// device, fixed by the first non-empty gradient submitted (kernels::Locate);
// the other kind is then refused (InvalidArgument, poisoning nothing). With
// device gradients the buckets are device memory of the communicator's
// device (CommunicatorOptions::device), allocated through kernels::Device
// when the first step queues them, and everything is ordered on ONE stream,
// ExchangerOptions::stream (the caller's, never one made here): Submit's
// copy into the bucket, the exchange (Communicator::AllreduceMeanOnDevice,
// on the comm thread: encode on the device, compact frames through pinned
// host memory, decode-average on the device; dense buckets: the ring,
// staged) and the copy back into the submitted spans. Device buckets are
// not split into the (a)/(b)/(c) stages. Wait / WaitAll return once the
// bucket's write-back is issued on the stream: later work on that stream
// sees the averages; the host reads them after waiting for the stream
// (kernels::Device::WaitStream). Nothing synchronizes the whole device.
// GradientSlot gives device spans. A hierarchical communicator, or one
// forcing the sparse allreduce, refuses device gradients (Unimplemented,
// poisoning nothing), as AllreduceMeanOnDevice does. Checkpoints copy the
// device residuals through the host in the same checksummed format.
//
// Submit, Flush and BeginStep belong to one training thread (their order
// defines the plan); Wait, WaitAll, the stats and health may be called
// from any thread. After the first step, Submit and the exchange allocate
// nothing in gradwire: buckets, pipeline slots and codec scratch are
// reused (Gloo's per-call bookkeeping is Gloo's).
#ifndef GRADWIRE_LIB_COMM_GRADIENT_EXCHANGER_H_
#define GRADWIRE_LIB_COMM_GRADIENT_EXCHANGER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/base/huge_pages.h"
#include "gradwire/kernels/device.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/comm/bucket_plan.h"
#include "gradwire/lib/comm/communicator.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/comm/stage_timeline.h"

namespace gradwire {

struct ExchangerOptions {
  // Bucket fusion threshold in bytes of fp32 gradient (DDP's default).
  // A bucket closes once it holds at least this much; a larger tensor
  // gets a bucket of its own.
  uint64_t bucket_bytes = 25ull << 20;
  // Flat compressed buckets in flight between encode and write-back (each
  // holds its frame and the P frames received). 2 lets bucket i+1 be
  // encoded while bucket i is on the wire; 1 runs encode, exchange and
  // decode of one bucket at a time (no overlap). 1..64.
  int pipeline_depth = 2;
  // The dense tail. Backprop leaves the last buckets partly filled, and
  // Flush sends them; where those are one dense bucket (the first layers'
  // biases, norms and small convolutions, which come last) and one
  // compressed bucket, the dense one rides in the compressed one's frames
  // (Communicator's dense section, as AllreduceMeanWithDense) where
  // Communicator::DenseTailRides says so: one exchange at the end of the
  // step instead of two, without the dense ring's agreement round and
  // 2(P - 1) steps, each of which waits for the slowest peer, for
  // (P - 1) x 4 bytes an element received against the ring's
  // 2(P - 1) / P x 4. Its average is then the rank-order sum divided by P
  // (the CPU reference's dense arithmetic) instead of the ring's; every
  // step, the first included, so a restored run gives the same bits.
  // Device gradients: never (no dense section on the device). Plan() and
  // DescribePlan() name the pairing.
  bool carry_dense_tail = true;
  // Device gradients only: the stream they are produced on (e.g. PyTorch's
  // current stream), which orders the copies in and out and the exchange.
  // Must be one the communicator's device accepts (checked at the first
  // device Submit). Passed in, never created by the exchanger.
  kernels::cuda::Stream stream = nullptr;
};

// Names one bucket of one step; what Wait waits for.
struct BucketTicket {
  uint32_t bucket = 0;
  uint64_t step = 0;
};

class GradientExchanger {
 public:
  // Takes the communicator over (it becomes the pipeline threads').
  static absl::StatusOr<std::unique_ptr<GradientExchanger>> Create(
      std::unique_ptr<Communicator> communicator, const ExchangerOptions& options);

  // Stops the pipeline after the stage each thread is running (bounded by
  // the transport deadline); buckets still queued are not exchanged.
  ~GradientExchanger();

  GradientExchanger(const GradientExchanger&) = delete;
  GradientExchanger& operator=(const GradientExchanger&) = delete;

  // Starts training step `step`, greater than every earlier one (frames
  // are bound to their step, so a reused step would look like a replay).
  // FailedPrecondition if the previous step still has buckets in flight.
  absl::Status BeginStep(uint64_t step);

  // Adds one gradient. `shape` decides the dense rule for 1-D tensors
  // (empty: unknown, only the size rule applies); if given, its product
  // must be grad.size(). Returns the ticket of the bucket it joined.
  absl::StatusOr<BucketTicket> Submit(absl::string_view name, absl::Span<float> grad,
                                      absl::Span<const int64_t> shape = {});

  // Zero-copy submission (DDP's gradient_as_bucket_view): the span inside
  // the bucket where tensor `name`'s gradient travels, valid for the
  // exchanger's lifetime. A caller that writes the gradient there and
  // Submits that very span skips Submit's copy in, and finds the average
  // there afterwards (no copy out). Write it only between WaitAll and the
  // next Submit of that tensor: while its bucket is in flight the slot is
  // the exchange's. FailedPrecondition before the first step's Flush
  // fixed the plan; NotFound for a name not in the plan.
  absl::StatusOr<absl::Span<float>> GradientSlot(absl::string_view name);

  // Ends the step's submissions: sends partly filled buckets (first step)
  // or checks every planned tensor was submitted (later steps).
  absl::Status Flush();

  // Blocks until the bucket is averaged and written back, for at most
  // `timeout`; if that passes while a bucket is on the wire, until the
  // transport's own deadline ends that call (at most another `timeout`),
  // whose error says why (e.g. which rank did not arrive) in the
  // DeadlineExceeded. Returns the exchange's status.
  absl::Status Wait(const BucketTicket& ticket, absl::Duration timeout);

  // Wait for every bucket of the current step (after Flush), likewise.
  absl::Status WaitAll(absl::Duration timeout);

  // OK, or the failure that poisoned the exchanger.
  absl::Status health() const;

  // Collective: returns once every rank has called Barrier, after this
  // rank's buckets in flight are done (each wait bounded by `timeout` and
  // the transport deadline). Lines ranks up between steps, e.g. so that
  // a step's timing starts together on every rank.
  absl::Status Barrier(absl::Duration timeout);

  // Collective orderly shutdown once the last step is done: waits (up to
  // `timeout`) for buckets in flight, then Communicator::Close. Call on
  // every rank before destroying a healthy exchanger or exiting.
  absl::Status Close(absl::Duration timeout);

  // Per-bucket error-feedback residuals (Communicator::SaveState); only
  // between steps (FailedPrecondition while buckets are in flight).
  absl::StatusOr<std::string> SaveState();
  absl::Status RestoreState(absl::string_view state);

  // Cost of the current (or last finished) step, and of all steps.
  ExchangeStats StepStats() const;
  ExchangeStats TotalStats() const;

  // When each stage of the current (or last finished) step ran
  // (stage_timeline.h): per bucket its kQueued instant, then its stages
  // in the order they finished (a dense tail that rides has none: its
  // carrier's stages carry it). Recording costs two clock reads a stage
  // and, from the third step on, no allocation.
  std::vector<StageSpan> StepTimeline() const;

  // The bucket plan, one line per bucket ("bucket 0: compressed, 3
  // tensors, 2359296 elements"); empty before the first Flush.
  std::string DescribePlan() const;
  std::vector<BucketInfo> Plan() const;
  size_t bucket_count() const;

 private:
  // Where a queued bucket is in the pipeline: the stage it waits for.
  enum class Stage { kEncode, kTransfer, kFinish, kDone };
  // A bucket of the plan at run time.
  struct Bucket {
    uint32_t id = 0;
    ExchangePath path = ExchangePath::kDense;
    const PlannedBucket* plan = nullptr;  // its members (stable, see bucket_plan.h)
    bool staged = false;           // flat compressed: stages (a) and (c) on the compute thread
    HugePageVector<float> data;    // fused gradients, in member order (host buckets)
    bool on_device = false;        // device gradients: the data is device_data instead
    float* device_data = nullptr;  // on_device: plan->elements floats on device()
    std::vector<absl::Span<float>> targets;  // per member: the caller's tensor this step
    size_t filled = 0;                       // members submitted this step
    bool queued = false;                     // in the pipeline this step
    Stage stage = Stage::kDone;
    // The dense tail (ExchangerOptions::carry_dense_tail): the dense bucket
    // this one's frames carry, or the compressed bucket that carries this
    // one (never queued itself).
    Bucket* rider = nullptr;
    Bucket* carrier = nullptr;
    int slot = -1;           // staged: its StagedBucket in slots_
    uint64_t done_step = 0;  // last step exchanged and written back
    bool done_any = false;
    // The fused gradients, wherever they live.
    absl::Span<float> Data() {
      return on_device ? absl::MakeSpan(device_data, plan->elements) : absl::MakeSpan(data);
    }
  };

  GradientExchanger(std::unique_ptr<Communicator> communicator, const ExchangerOptions& options);

  void ComputeLoop();  // stages (a) and (c)
  void CommLoop();     // stage (b)
  // The compute thread's next job, mutex held: (a) of the next bucket
  // while a slot is free (it feeds the wire), else (c) of the oldest
  // transferred one. Null if none.
  Bucket* NextComputeJobLocked();
  // Copies a bucket's averaged data into its members' tensors.
  void WriteBack(const Bucket& bucket);

  // The device part (gradient_exchanger_device.cc).
  kernels::Device& device() const;
  // Submit: whether a gradient at `where` may join (one kind per
  // exchanger; device: a flat communicator and a stream the device
  // accepts); fixes the kind on the first non-empty gradient.
  absl::Status CheckLocationLocked(absl::string_view name, kernels::Location where);
  bool DeviceGradientsLocked() const { return located_ && location_ == kernels::Location::kDevice; }
  // First step, device gradients: allocates the bucket's device memory
  // (its size is final once it is queued) and copies its members in.
  absl::Status PrepareDeviceBucketLocked(Bucket* bucket);
  // Copies member `member`'s submitted gradient into the device bucket
  // (nothing for a gradient written into its slot), on options_.stream.
  absl::Status CopyInDevice(const Bucket& bucket, size_t member);
  // WriteBack for a device bucket, on options_.stream.
  absl::Status WriteBackDevice(const Bucket& bucket);
  // Destructor: frees device buckets once the stream is done with them.
  void FreeDeviceBuckets();
  // Bookkeeping of a finished stage, mutex held: stats, poison, next stage.
  // `stage` ran from `start` until now.
  void StageDoneLocked(Bucket* bucket, const absl::Status& s, const ExchangeStats& cost,
                       PipelineStage stage, absl::Time start);
  // Caller side, mutex held. Fails only preparing a device bucket.
  absl::Status EnqueueLocked(Bucket* bucket);
  // Later steps: queues `bucket` (just complete) or its carrier once it and
  // its rider are both complete.
  absl::Status EnqueueIfCompleteLocked(Bucket* bucket);
  // First step's Flush: pairs the dense tail with a compressed bucket
  // among `rest` (the buckets Fix closed, none queued yet), where the
  // options and the model allow.
  void PairDenseTailLocked(const std::vector<uint32_t>& rest);
  absl::Status PoisonLocked(absl::Status status);
  absl::Status CheckHealthyLocked() const;
  // Waits (up to `timeout`) until no bucket is in flight; the failure, if
  // any, names `what`. OK means healthy and idle, with `lock` held.
  absl::Status WaitIdleLocked(std::unique_lock<std::mutex>& lock, absl::Duration timeout,
                              const char* what);
  bool DoneLocked(const Bucket& bucket) const;
  // First step: adds a tensor to the plan (and its bucket, if new); sets
  // its place among the bucket's members and whether the bucket is full.
  absl::StatusOr<Bucket*> PlanTensorLocked(absl::string_view name, uint64_t size,
                                           absl::Span<const int64_t> shape, uint32_t* member,
                                           bool* closed);

  // After Create: the comm thread's (collectives, AllreduceMean), the
  // compute thread's (staged (a)/(c), see Communicator), and the caller's
  // for Close and checkpoints while nothing is in flight.
  std::unique_ptr<Communicator> comm_;
  const ExchangerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable compute_cv_;  // compute thread: a job or stop
  std::condition_variable comm_cv_;     // comm thread: a job or stop
  std::condition_variable done_cv_;     // callers: a bucket finished or failure
  bool stop_ = false;
  absl::Status poison_;
  // This step's buckets in the order they were queued (the same on every
  // rank). Each stage walks it in order with its own cursor, so stages
  // need no queues of their own: a bucket waits at a cursor until the
  // previous stage is done with it.
  std::vector<Bucket*> queue_;
  size_t encode_at_ = 0;          // compute thread, stage (a)
  size_t transfer_at_ = 0;        // comm thread, stage (b)
  size_t finish_at_ = 0;          // compute thread, stage (c)
  uint64_t staged_started_ = 0;   // staged buckets this step that began (a)
  uint64_t staged_finished_ = 0;  // ... that finished (c): slots in use = difference
  int in_flight_ = 0;             // queued, not yet written back
  absl::Time span_start_;         // first bucket of the step queued
  bool span_started_ = false;
  // One per pipeline slot; staged bucket j of a step uses slot j % depth.
  std::vector<std::unique_ptr<Communicator::StagedBucket>> slots_;

  // The plan, and a Bucket per planned bucket (index = id). buckets_
  // owns Bucket objects by pointer so the threads' pointers stay valid
  // while the first step adds buckets.
  BucketPlan plan_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  bool step_active_ = false;
  bool flushed_ = false;
  bool any_step_ = false;
  uint64_t step_ = 0;
  size_t next_entry_ = 0;  // tensors submitted this step
  // Where this exchanger's gradients live, once a non-empty one came.
  bool located_ = false;
  kernels::Location location_ = kernels::Location::kHost;

  ExchangeStats step_stats_;
  ExchangeStats total_stats_;
  std::vector<StageSpan> timeline_;  // this step's; cleared (capacity kept) by BeginStep

  // Last: started after everything above exists.
  std::thread compute_thread_;
  std::thread comm_thread_;
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_GRADIENT_EXCHANGER_H_
