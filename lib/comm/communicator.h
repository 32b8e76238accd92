// Communicator: averages gradient buffers across the ranks of a job,
// compressed or dense, flat or hierarchical. The synchronous core that the
// asynchronous GradientExchanger (gradient_exchanger.h) drives from its
// background thread; also usable directly, one call per buffer.
//
// Paths (PathFor picks one per buffer by the path rule of bucket_plan.h;
// AllreduceMean can be told which):
//   kDense       sealed ring allreduce of fp32 (transport/sealed_ring.h),
//                divided by the world size. Used for method "none" and for
//                small or 1-D tensors (biases, norms), where compression
//                saves less than it costs, like DDP and HiTopKComm do.
//   kCompressed  flat: the exchange the cost model picks per buffer
//                (exchange_cost_model.h): SparseAllgather, SparseAllreduce
//                (sparse specs), CastAllreduce (fp16, bf16) or the ring.
//                hierarchical (HiTopKComm, ranks grouped into nodes):
//                sealed reduce-scatter inside the node -> error feedback +
//                compression of this rank's shard -> the picked exchange
//                among the ranks with the same local rank (one per node)
//                -> sealed allgather of the averaged shards inside the node
//                (after a one-word round in the node sharing each rank's
//                cross-node verdict, so a failure seen by one cross-node
//                group is reported by every rank).
//                Compressed traffic then crosses the slow inter-node
//                network once per node, not once per GPU.
//
// Every byte that enters a sum is authenticated with the job secret:
// compressed frames by their HMAC trailer (frame_auth.h), dense chunks by
// their GMAC trailer under a session key that Create agrees on with every
// rank (chunk_mac.h). A rank holding another secret makes Create fail on
// every rank with Unauthenticated naming it (another job id sharing the
// secret: PermissionDenied).
//
// Every rank must make the same calls in the same order with the same
// bucket ids, steps and lengths; disagreement is reported on every rank as
// InvalidArgument "collective mismatch ...". Any failure poisons the
// communicator: every later call returns FailedPrecondition quoting the
// first failure, until the caller builds a new one (residuals of a failed
// step are not trustworthy; restore them from a checkpoint).
//
// Not thread-safe: one thread at a time (collectives must be issued in the
// same order on every rank anyway), except for the staged calls below,
// whose CPU stages may run on a second thread.
#ifndef GRADWIRE_LIB_COMM_COMMUNICATOR_H_
#define GRADWIRE_LIB_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/kernels/device.h"
#include "gradwire/lib/codec/codec.h"
#include "gradwire/lib/codec/compression_spec.h"
#include "gradwire/lib/codec/device_call.h"
#include "gradwire/lib/codec/error_feedback.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/lib/comm/bucket_plan.h"
#include "gradwire/lib/comm/cast_allreduce.h"
#include "gradwire/lib/comm/exchange_cost_model.h"
#include "gradwire/lib/comm/exchange_stats.h"
#include "gradwire/lib/comm/sparse_allgather.h"
#include "gradwire/lib/comm/sparse_allreduce.h"
#include "gradwire/transport/chunk_authenticator.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"

namespace gradwire {

struct CommunicatorOptions {
  CompressionSpec compression;
  // HiTopKComm; nodes come from the rendezvous config (node_id, local
  // world size). Every node must hold the same number of ranks.
  bool hierarchical = false;
  // The path rule's settings (PathRule in bucket_plan.h): tensors with
  // fewer elements go dense (DDP's and the paper's rule of thumb: below
  // ~16K elements compression costs more than it saves), and 1-D tensors
  // (biases, norm scales) whatever their size.
  uint64_t dense_below_elements = 16384;
  bool dense_one_dimensional = true;
  // Only kRing: dense exchanges are authenticated chunk by chunk, which
  // the sealed ring does and Gloo's halving-doubling cannot (Create
  // refuses it).
  transport::AllreduceAlgorithm dense_algorithm = transport::AllreduceAlgorithm::kRing;
  // Connect / ConnectAt: transport::GroupOptions::event_loop_nice (0..19),
  // for ranks that share a machine's cores.
  int event_loop_nice = 0;
  // How a compressed buffer travels: per buffer, the cost model
  // (exchange_cost_model.h) picks the dense ring, the sparse allgather,
  // the sparse allreduce or the cast allreduce (flat; hierarchical: the
  // cross-node stage, any but the ring) from P, n, the spec and
  // `exchange_model`. At Create the ranks agree on the model (each figure
  // the slowest rank's), measured first with measure_exchange_model
  // (else Create refuses a model CheckExchangeModel refuses:
  // exchange_model_spec.h, which also parses its text form).
  // `exchange` set: every compressed buffer takes that one instead
  // (kSparseAllreduce needs a sparse spec, kCastAllreduce fp16 or bf16;
  // Create refuses them otherwise; hierarchical mode: the cross-node stage
  // for the compressed kinds, the whole buffer by the world's ring for
  // kDenseRing). The device path takes the sparse allgather where the
  // cast allreduce is picked (its average is not rounded to 16 bits). A
  // buffer with a dense part (AllreduceMeanWithDense) sends it in the
  // allgather's frames where DenseRides says so, else by the ring first;
  // a forced exchange other than the allgather always sends it by the
  // ring first. Every rank must pass the same settings (join.h checks them).
  std::optional<ExchangeKind> exchange;
  ExchangeModel exchange_model;
  bool measure_exchange_model = false;
  // AllreduceMeanOnDevice's device (kernels/device.h): null is the CUDA
  // device; tests pass a kernels::HostDevice. Must outlive the
  // communicator.
  kernels::Device* device = nullptr;
  // Bounds each wait for a device stream.
  absl::Duration device_timeout = absl::Seconds(60);
};

class Communicator {
 public:
  // Builds on an existing world group. `node_id` and `local_world_size`
  // place this rank (used only when options.hierarchical). Collective: the
  // key round of the dense path (two small allgathers over the world; a
  // rank with another secret fails every rank here), then, in hierarchical
  // mode, the split into node and cross-node groups.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      std::unique_ptr<transport::GlooGroup> world, int node_id, int local_world_size,
      FrameAuthenticator auth, const CommunicatorOptions& options);

  // Rendezvous from `config` (completed from the environment by the
  // caller, see rendezvous_config.h), the settings check (AgreedSettings:
  // every rank must pass the same options, or all fail with
  // InvalidArgument naming the ranks and values), then Create. The job id names the
  // MAC's job; the bind address is ResolveBindAddress(config) (an --iface
  // or address, never loopback for a multi-host job).
  static absl::StatusOr<std::unique_ptr<Communicator>> Connect(
      const transport::RendezvousConfig& config, const JobSecret& secret,
      const CommunicatorOptions& options);

  // Connect, binding `bind_address` as given: no ResolveBindAddress, so
  // also loopback for a job that spans "hosts" (LOCAL_WORLD_SIZE <
  // WORLD_SIZE). For nodes emulated on one machine (tools' --emulate_nodes,
  // the Python binding's emulate_nodes=True); a real multi-host job wants
  // Connect, whose guard refuses loopback.
  static absl::StatusOr<std::unique_ptr<Communicator>> ConnectAt(
      const transport::RendezvousConfig& config, absl::string_view bind_address,
      const JobSecret& secret, const CommunicatorOptions& options);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const CommunicatorOptions& options() const { return options_; }

  // The path rule of `options`: everything dense for method "none", else
  // by dense_below_elements and dense_one_dimensional. Also for callers
  // that plan without a communicator (the Python binding's bucket_plan).
  static PathRule PathRuleFor(const CommunicatorOptions& options);

  // What every rank's options must agree on, as "key=value;" text for
  // CheckSameSettings (rendezvous_checks.h): the canonical spec, the
  // hierarchy, the dense rule and algorithm, the exchange, and whether the
  // exchange model is measured (a collective of its own at Create: ranks
  // that differ there would talk past each other; the model's given
  // figures may differ, the slowest rank's count). Connect checks it
  // before Create, so that ranks given different specs fail there,
  // naming the ranks and values, not at their first exchange.
  static std::string AgreedSettings(const CommunicatorOptions& options);
  PathRule path_rule() const { return PathRuleFor(options_); }
  // Which path a tensor of `elements` elements takes by default:
  // path_rule().PathFor.
  ExchangePath PathFor(uint64_t elements, bool one_dimensional) const;

  // In place: data = average over ranks of every rank's data. `bucket`
  // names the buffer: it keys its error-feedback residual and binds its
  // frames' MACs, so it must denote the same buffer at every step. `step`
  // is the training step (frames of another step are refused as replays),
  // and a bucket's steps must grow: a call whose step is not after that
  // bucket's previous one is refused (InvalidArgument, nothing sent,
  // nothing poisoned), since a repeated step would accept a frame recorded
  // at its first use. RestoreState starts every bucket's steps afresh.
  absl::Status AllreduceMean(uint32_t bucket, uint64_t step, absl::Span<float> data,
                             ExchangePath path);

  // One buffer that mixes tensors to compress with tensors to keep exact
  // (a DDP bucket holding weights and biases): `data` takes the compressed
  // path (error feedback keyed by `bucket`, as in AllreduceMean), `dense`
  // becomes the rank-order sum of every rank's `dense` / world size,
  // exact. Where DenseRides(data.size(), dense.size()), in one exchange:
  // `dense` travels in the allgather's frames (SparseAllgather's dense
  // section), which saves the dense allreduce's rounds, but every rank
  // receives every rank's dense part: small parts ride, large ones do
  // not (the DDP hook also caps the part: (P-1) x 4 x dense.size() <=
  // 256 KiB). Otherwise in two: the dense ring, then `data` by the
  // exchange KindFor picks. Every rank must pass the same lengths (else
  // "collective mismatch"). Hierarchical communicators always take two
  // (dense, then compressed). On error the communicator is poisoned.
  absl::Status AllreduceMeanWithDense(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                      absl::Span<float> dense);

  // AllreduceMean for a buffer in device memory, ordered on `stream` (the
  // caller's, e.g. PyTorch's current stream). CI runs it on
  // kernels::HostDevice; ran on an H200 (docs/device_path.md).
  //   kCompressed  encode on the device (error feedback: the residual
  //                lives on the device), copy only the compact frame to
  //                pinned host memory, the sparse allgather of frames over
  //                Gloo, copy the P frames' payloads back, decode-average
  //                on the device. No dense device<->host copy. The sparse
  //                allreduce is host-only: where the cost model would pick
  //                it, the device path takes the sparse allgather (so the
  //                bits equal AllreduceMean's only where that picks the
  //                allgather or the dense ring).
  //   kDense       (and the cost model's dense ring) the sealed ring
  //                allreduce, staged through pinned host memory: one
  //                device->host copy, the ring, one host->device copy.
  // Returns once the frames (or the staged dense bytes) are back on the
  // device; the decode runs on asynchronously on `stream`: order later
  // work on the same stream. Flat only (hierarchical: Unimplemented).
  // Refused without poisoning anything: a host `data` (InvalidArgument:
  // use AllreduceMean), a `data` longer than the device memory at its
  // address (Device::CheckDeviceRange), a stream the device refuses. Transport and frame
  // failures poison the communicator as in AllreduceMean.
  absl::Status AllreduceMeanOnDevice(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                     ExchangePath path, kernels::cuda::Stream stream);
  // Whether this communicator can take device buffers on `stream`: flat
  // (Unimplemented if hierarchical), not forced to the sparse allreduce
  // (Unimplemented: the device path exchanges by the allgather), a stream
  // its device knows (InvalidArgument). AllreduceMeanOnDevice checks it;
  // a caller may check it once up front (GradientExchanger does).
  absl::Status CheckDevicePath(kernels::cuda::Stream stream) const;

  // The staged form of a flat compressed AllreduceMean, for a caller that
  // pipelines buckets (GradientExchanger): while TransferStage has bucket
  // i on the wire, EncodeStage can prepare bucket i+1 and FinishStage
  // average bucket i-1. Together they are exactly AllreduceMean (same
  // frames, same floats). Only where CanStage(path, elements): flat and
  // compressed (every exchange a compressed bucket can take but the ring).
  //   EncodeStage  error feedback + encode + sign (the cast allreduce:
  //                + its sealed region frames; the sparse allreduce: + its
  //                entries read back); CPU only.
  //   TransferStage  the collectives (the allgather: descriptors,
  //                agreement, allgatherv; the cast and sparse allreduces:
  //                all of their Complete, which writes the average into
  //                EncodeStage's `data` and, for the sparse allreduce,
  //                gives back to the residual what the global selection
  //                dropped).
  //   FinishStage  the allgather: verify MACs, decode-accumulate, average
  //                into `data`; CPU only. The allreduces: nothing.
  // Threads: EncodeStage and FinishStage from one thread (they share the
  // residuals and decode scratch); TransferStage, AllreduceMean, Close and
  // the checkpoint calls from one other (the group's owner) or with the
  // first idle. A StagedBucket is used by one stage at a time and handed on
  // under a mutex; `data` must stay valid and untouched by the caller from
  // EncodeStage to FinishStage. The staged calls neither check nor set
  // the poison nor count in last_call()/totals(): their caller owns
  // failure handling (stop at the first failure) and adds `*cost`.
  struct StagedBucket {
    SparseAllgather::InFlight gather;
    CastAllreduce::Staged cast;
    SparseAllreduce::Staged sparse;
    ExchangeKind kind = ExchangeKind::kSparseAllgather;  // which of the three it takes
  };
  bool CanStage(ExchangePath path) const {
    return path == ExchangePath::kCompressed && !options_.hierarchical;
  }
  absl::Status EncodeStage(uint32_t bucket, uint64_t step, absl::Span<float> data, StagedBucket& f,
                           ExchangeStats* cost) {
    return EncodeStage(bucket, step, data, {}, f, cost);
  }
  absl::Status TransferStage(StagedBucket& f, ExchangeStats* cost);
  absl::Status FinishStage(StagedBucket& f, absl::Span<float> data, ExchangeStats* cost) {
    return FinishStage(f, data, {}, cost);
  }
  // The staged form of AllreduceMeanWithDense where the dense part rides
  // in the allgather's frames: `dense` is read by EncodeStage and becomes
  // the rank-order average in FinishStage (it must stay untouched in
  // between). Only for a bucket that takes the sparse allgather
  // (FailedPrecondition otherwise, nothing sent).
  absl::Status EncodeStage(uint32_t bucket, uint64_t step, absl::Span<float> data,
                           absl::Span<const float> dense, StagedBucket& f, ExchangeStats* cost);
  absl::Status FinishStage(StagedBucket& f, absl::Span<float> data, absl::Span<float> dense,
                           ExchangeStats* cost);
  // Whether a compressed buffer of `elements` can take the staged calls.
  bool CanStage(ExchangePath path, uint64_t elements) const {
    const ExchangeKind kind = KindFor(elements);
    return CanStage(path) && kind != ExchangeKind::kDenseRing;
  }
  // The exchange a compressed buffer of `elements` takes (see
  // CommunicatorOptions::exchange), the same on every rank.
  ExchangeKind KindFor(uint64_t elements) const;
  // The cost model's pick for that buffer, whether or not `exchange` forces
  // another.
  ExchangeKind ModelKindFor(uint64_t elements) const;
  // Whether AllreduceMeanWithDense (flat) sends a dense part of
  // `dense_elements` inside the allgather's frames with the compressed
  // buffer of `elements`: where KindFor is the allgather, where
  // DenseRidesAllgather says so (the part's bytes in every frame no
  // slower than its own ring: the exchanger's dense-tail rule); where it
  // is another exchange that `exchange` forces, never; else where the
  // cost model predicts the allgather carrying both no slower than its
  // pick plus a dense ring of the part. The same on every rank.
  bool DenseRides(uint64_t elements, uint64_t dense_elements) const;
  // Whether GradientExchanger's dense tail of `dense_elements` rides in
  // the staged frames of its compressed bucket of `elements`: where that
  // bucket takes the sparse allgather, staged (flat), and
  // DenseRidesAllgather with the agreed model (exchange_cost_model.h). The
  // same on every rank.
  bool DenseTailRides(uint64_t elements, uint64_t dense_elements) const;
  // What the cost model weighs for that buffer: flat, the world's ranks
  // and `elements`; hierarchical, the cross-node group's ranks and one
  // node shard (the stage the choice is about).
  struct ModelInput {
    int ranks = 0;
    uint64_t elements = 0;
  };
  ModelInput ModelInputFor(uint64_t elements) const;
  const ExchangeModel& exchange_model() const { return model_; }
  // Whether a dense buffer of `elements` takes two levels in this
  // communicator (hierarchical, DenseTwoLevel with the agreed model) rather
  // than the world's ring.
  bool DenseTakesTwoLevels(uint64_t elements) const;

  // OK, or the failure that poisoned the communicator.
  absl::Status health() const { return poison_; }

  // Blocks until every rank of the world group has called Barrier (or
  // the transport deadline passes). Between exchanges only; a failure
  // poisons the communicator like a failed exchange.
  absl::Status Barrier();

  // Collective orderly shutdown: GlooGroup::Close (a barrier, then the
  // connections close) on the cross-node, node and world groups, in that
  // order on every rank. Call it on every rank before destroying a healthy
  // communicator or exiting: a rank that closes its sockets while a peer
  // is still finishing the last exchange can make that peer fail with
  // Unavailable. Afterwards every call returns FailedPrecondition, but
  // Close itself: once it has succeeded, a second Close does nothing and
  // returns OK (as closing a file twice). Destroying a communicator without
  // Close never blocks.
  absl::Status Close();

  // Error-feedback residuals of every bucket as bytes (per rank: each
  // rank saves its own), with the layout they depend on (world size,
  // rank, hierarchy, spec) and a checksum.
  absl::StatusOr<std::string> SaveState() const;
  // Replaces the residuals with a SaveState of the same layout. Refuses,
  // changing nothing, corrupt or truncated bytes (DataLoss /
  // InvalidArgument) and a state of another layout or spec
  // (InvalidArgument, saying which: like a state of another codec, it is
  // the wrong argument, not a communicator that cannot take one).
  // FailedPrecondition means the communicator itself is closed or
  // poisoned.
  absl::Status RestoreState(absl::string_view state);

  // Divides every residual of this rank by `divisor` (finite, > 0):
  // residuals made under a loss scale S go on under S' with S / S'
  // (ErrorFeedback::DivideAll; exact for powers of two). Not collective;
  // every rank should do it alike before its next exchange (a rank that
  // does not sends its residual at the old scale's weight: the averages
  // stay the same on every rank, but are not the unscaled run's).
  // InvalidArgument for a divisor that is not finite and > 0;
  // FailedPrecondition when closed or poisoned.
  absl::Status DivideResiduals(float divisor);

  // The error-feedback residual of compressed bucket `bucket` after its
  // last exchange (this rank's; its node shard in hierarchical mode);
  // empty before the first compressed exchange of the bucket or with
  // error feedback off. Valid until the next exchange or RestoreState.
  // A residual element is exactly 0 where this rank's last frame carried
  // it in full (selection codecs with fp32 values), which is how a DDP
  // hook applies DGC's momentum factor masking.
  absl::Span<const float> Residual(uint32_t bucket) const;

  // Cost of the last AllreduceMean, and the running total.
  const ExchangeStats& last_call() const { return last_call_; }
  const ExchangeStats& totals() const { return totals_; }

 private:
  Communicator(std::unique_ptr<transport::GlooGroup> world, std::unique_ptr<Codec> codec,
               FrameAuthenticator auth, const CommunicatorOptions& options);

  // FailedPrecondition quoting the failure that poisoned this
  // communicator, if one did.
  absl::Status CheckUsable() const;
  // Records `step` as `bucket`'s last, or refuses it (InvalidArgument)
  // when it is not after the bucket's previous step.
  absl::Status TakeStep(uint32_t bucket, uint64_t step);
  // AllreduceMean and AllreduceMeanWithDense: one exchange, its cost
  // recorded and a failure poisoning the communicator. `dense` is empty
  // for AllreduceMean; path kDense never has one.
  absl::Status Exchange(uint32_t bucket, uint64_t step, absl::Span<float> data,
                        absl::Span<float> dense, ExchangePath path);
  // Which exchange of a bucket a sealed collective is (ChunkScope::stage).
  enum Stage : uint32_t {
    kDenseStage = 1,              // the world's allreduce of a dense buffer
    kNodeReduceScatterStage = 2,  // hierarchical step 1
    kNodeAllgatherStage = 3,      // hierarchical step 4
    kCastContributionStage = 4,   // the cast allreduce's contributions
    kCastAllgatherStage = 5,      // the cast allreduce's allgather of averages
    // A dense buffer in hierarchical mode (DenseHierarchical):
    kDenseNodeReduceScatterStage = 6,  // in the node
    kDenseCrossStage = 7,              // the ring across nodes on a shard
    kDenseNodeAllgatherStage = 8,      // in the node
  };
  // The sealed dense ring of `data` and its division by the world size:
  // the world's ring, or DenseHierarchical where DenseTakesTwoLevels.
  absl::Status Dense(uint32_t bucket, uint64_t step, absl::Span<float> data, ExchangeStats* cost);
  // A dense buffer hierarchically, as a tuned dense stack runs it at scale:
  // a sealed reduce-scatter in the node, the sealed ring across nodes on
  // each 1/G shard (2 (N - 1) steps, not the world ring's 2 (NG - 1)), a
  // sealed allgather in the node. The world ring's mean up to rounding:
  // the same terms summed in another order (bit for bit where the sums are
  // exact), the same on every rank.
  absl::Status DenseHierarchical(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                 ExchangeStats* cost);
  // data /= world size, booked as compute.
  void Average(absl::Span<float> data, ExchangeStats* cost) const;
  // shards_: ceil(n / G) elements per local rank, the last ones what is
  // left. Returns where this rank's shard begins (the sum of those before).
  uint64_t SetShards(uint64_t n);
  // The cross-node stage's status shared in the node (AllgatherU64): every
  // rank of the node returns the first failure any of them saw.
  absl::Status ShareCrossVerdict(const absl::Status& cross, uint32_t bucket, uint64_t step,
                                 ExchangeStats* cost);
  // The key round: agrees on this session's key (dense chunks and frames)
  // with every rank and checks that they all hold the job secret.
  absl::Status AgreeSessionKey();
  absl::Status Hierarchical(absl::string_view key, uint32_t bucket, uint64_t step,
                            absl::Span<float> data, ExchangeStats* cost);
  void AddWire(const transport::GlooGroup& group, ExchangeStats* cost) const;
  // The dense ring for device data, staged through pinned host memory.
  absl::Status DenseOnDevice(uint32_t bucket, uint64_t step, absl::Span<float> data,
                             const DeviceCall& call, ExchangeStats* cost);

  std::unique_ptr<transport::GlooGroup> world_;
  std::unique_ptr<transport::GlooGroup> node_;   // hierarchical: ranks of my node
  std::unique_ptr<transport::GlooGroup> cross_;  // hierarchical: my local rank on every node
  std::unique_ptr<Codec> codec_;
  FrameAuthenticator auth_;                                    // the job's: keys the session
  std::unique_ptr<transport::ChunkAuthenticator> chunk_auth_;  // dense chunks, this session
  std::unique_ptr<FrameSigner> frame_auth_;                    // frames, this session
  const CommunicatorOptions options_;
  ErrorFeedback ef_;
  std::unique_ptr<SparseAllgather> flat_;
  std::unique_ptr<SparseAllgather> across_nodes_;
  std::unique_ptr<SparseAllreduce> sparse_allreduce_;  // sparse specs only
  std::unique_ptr<CastAllreduce> cast_allreduce_;      // fp16 and bf16 only
  ExchangeModel model_;                                // agreed at Create

  absl::Status poison_;
  bool closed_ = false;  // Close() succeeded
  // Each bucket's last step, for TakeStep.
  std::map<uint32_t, uint64_t> last_step_;
  ExchangeStats last_call_;
  ExchangeStats totals_;
  std::vector<float> work_;         // hierarchical: reduce-scatter scratch; forced ring: both parts
  std::vector<uint64_t> shards_;    // hierarchical: shard bytes per local rank
  std::vector<uint64_t> verdicts_;  // hierarchical: cross-node status per local rank
  std::unique_ptr<DeviceScratch> device_scratch_;  // device path: codec staging
  std::unique_ptr<DeviceScratch> device_dense_;    // device path: the dense ring's staging
};

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_COMMUNICATOR_H_
