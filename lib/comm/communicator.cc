#include "gradwire/lib/comm/communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/ensure_size.h"
#include "gradwire/base/envelope.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/comm/exchange_model_spec.h"
#include "gradwire/lib/comm/rendezvous_checks.h"
#include "gradwire/lib/comm/session_chunk_auth.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace {

// Checkpoint layout (base/envelope.h, little endian):
//   "GWCM" | u32 version | body | u64 XXH3-64 of everything before it
//   body = u32 world size | u32 rank | u32 hierarchical | u32 node size
//          | u32 spec_len | spec | u64 ef_len | ErrorFeedback state
constexpr char kMagic[] = "GWCM";
constexpr uint32_t kVersion = 1;
constexpr char kWhat[] = "communicator checkpoint";

}  // namespace

Communicator::Communicator(std::unique_ptr<transport::GlooGroup> world,
                           std::unique_ptr<Codec> codec, FrameAuthenticator auth,
                           const CommunicatorOptions& options)
    : world_(std::move(world)),
      codec_(std::move(codec)),
      auth_(std::move(auth)),
      options_(options),
      ef_(*codec_) {}

Communicator::~Communicator() = default;

int Communicator::rank() const { return world_->rank(); }
int Communicator::size() const { return world_->size(); }

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    std::unique_ptr<transport::GlooGroup> world, int node_id, int local_world_size,
    FrameAuthenticator auth, const CommunicatorOptions& options) {
  if (world == nullptr) return absl::InvalidArgumentError("Communicator::Create: no world group");
  GRADWIRE_RETURN_IF_ERROR(options.compression.Validate());
  if (options.dense_algorithm != transport::AllreduceAlgorithm::kRing) {
    return absl::InvalidArgumentError(
        "dense exchanges are authenticated chunk by chunk, which only the sealed ring does: "
        "dense_algorithm must be ring (halving-doubling is no longer offered)");
  }
  absl::StatusOr<std::unique_ptr<Codec>> codec =
      MakeCodec(options.compression.ForSender(world->rank()));
  if (!codec.ok()) return codec.status();
  std::unique_ptr<Communicator> c(
      new Communicator(std::move(world), std::move(*codec), std::move(auth), options));
  if (options.exchange == ExchangeKind::kSparseAllreduce &&
      !SparseAllreduce::Supports(c->codec_->spec())) {
    return absl::InvalidArgumentError(
        absl::StrCat("exchange sparse_allreduce needs a sparse spec (topk, approx_topk, randomk), "
                     "got \"",
                     options.compression.ToString(), "\""));
  }
  if (options.exchange == ExchangeKind::kCastAllreduce &&
      !CastAllreduce::Supports(c->codec_->spec())) {
    return absl::InvalidArgumentError(
        absl::StrCat("exchange cast_allreduce needs an fp16 or bf16 spec, got \"",
                     options.compression.ToString(), "\""));
  }
  if (!options.measure_exchange_model) {
    absl::Status model = CheckExchangeModel(options.exchange_model);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("exchange_model: ", model.message()));
    }
  }
  GRADWIRE_ASSIGN_OR_RETURN(c->model_,
                            AgreeExchangeModel(*c->world_, options.exchange_model,
                                               options.measure_exchange_model, c->codec_.get()));
  // The session's key signs frames and dense chunks alike, so the
  // exchanges are built once it is agreed.
  GRADWIRE_RETURN_IF_ERROR(c->AgreeSessionKey());
  c->flat_ = std::make_unique<SparseAllgather>(*c->codec_, *c->frame_auth_);
  if (SparseAllreduce::Supports(c->codec_->spec())) {
    c->sparse_allreduce_ = std::make_unique<SparseAllreduce>(*c->codec_, *c->frame_auth_);
  }
  if (CastAllreduce::Supports(c->codec_->spec())) {
    CastAllreduceOptions cast;
    cast.contribution_stage = kCastContributionStage;
    cast.allgather_stage = kCastAllgatherStage;
    c->cast_allreduce_ =
        std::make_unique<CastAllreduce>(*c->codec_, *c->frame_auth_, *c->chunk_auth_, cast);
  }
  if (!options.hierarchical) return c;

  if (node_id < 0 || local_world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical exchange needs node id and local world size, got ", node_id,
                     " and ", local_world_size, " (set LOCAL_WORLD_SIZE or --local_world_size)"));
  }
  // Split is collective: node group first, then the cross-node group of
  // ranks with the same position in their node, on every rank alike.
  absl::StatusOr<std::unique_ptr<transport::GlooGroup>> node =
      c->world_->Split(static_cast<uint32_t>(node_id));
  if (!node.ok()) return node.status();
  c->node_ = std::move(*node);
  // Shards are cut per position in the node, so every node must have the
  // same number of ranks: check it together before splitting again.
  std::vector<uint64_t> node_sizes(c->world_->size());
  GRADWIRE_RETURN_IF_ERROR(c->world_->AllgatherU64(c->node_->size(), absl::MakeSpan(node_sizes)));
  for (int r = 0; r < c->world_->size(); ++r) {
    if (node_sizes[r] != node_sizes[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collective mismatch: hierarchical exchange needs equal nodes, but rank 0's node has ",
          node_sizes[0], " ranks and rank ", r, "'s has ", node_sizes[r]));
    }
  }
  if (c->node_->size() != local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", c->world_->rank(), ": local world size is ", local_world_size,
                     " but ", c->node_->size(), " ranks share node id ", node_id));
  }
  absl::StatusOr<std::unique_ptr<transport::GlooGroup>> cross =
      c->world_->Split(static_cast<uint32_t>(c->node_->rank()));
  if (!cross.ok()) return cross.status();
  c->cross_ = std::move(*cross);
  c->across_nodes_ = std::make_unique<SparseAllgather>(*c->codec_, *c->frame_auth_);
  c->shards_.resize(c->node_->size());
  return c;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Connect(
    const transport::RendezvousConfig& config, const JobSecret& secret,
    const CommunicatorOptions& options) {
  GRADWIRE_RETURN_IF_ERROR(transport::Validate(config));
  absl::StatusOr<std::string> address = transport::ResolveBindAddress(config);
  if (!address.ok()) return address.status();
  return ConnectAt(config, *address, secret, options);
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::ConnectAt(
    const transport::RendezvousConfig& config, absl::string_view bind_address,
    const JobSecret& secret, const CommunicatorOptions& options) {
  GRADWIRE_RETURN_IF_ERROR(transport::Validate(config));
  absl::StatusOr<std::shared_ptr<transport::RendezvousStore>> store =
      transport::RendezvousStore::Open(config);
  if (!store.ok()) return store.status();
  transport::GroupOptions group_options;
  group_options.bind_address = std::string(bind_address);
  if (config.timeout > absl::ZeroDuration()) group_options.timeout = config.timeout;
  group_options.event_loop_nice = options.event_loop_nice;
  absl::StatusOr<std::unique_ptr<transport::GlooGroup>> world = transport::GlooGroup::Create(
      config.rank, config.world_size, (*store)->Scoped("world"), group_options);
  if (!world.ok()) return world.status();
  GRADWIRE_RETURN_IF_ERROR(CheckSameSettings(**world, AgreedSettings(options)));
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(secret, config.job_id);
  if (!auth.ok()) return auth.status();
  return Create(std::move(*world), config.node_id, config.local_world_size, std::move(*auth),
                options);
}

std::string Communicator::AgreedSettings(const CommunicatorOptions& options) {
  return absl::StrCat(
      "spec=", options.compression.ToString(), ";hierarchical=", options.hierarchical ? 1 : 0,
      ";dense_below_elements=", options.dense_below_elements,
      ";dense_one_dimensional=", options.dense_one_dimensional ? 1 : 0, ";dense_algorithm=",
      options.dense_algorithm == transport::AllreduceAlgorithm::kRing ? "ring" : "halving_doubling",
      ";exchange=", options.exchange ? ExchangeKindName(*options.exchange) : "auto",
      ";measure_exchange_model=", options.measure_exchange_model ? 1 : 0, ";");
}

PathRule Communicator::PathRuleFor(const CommunicatorOptions& options) {
  PathRule rule;
  rule.compressing = options.compression.method != Method::kNone;
  rule.dense_below_elements = options.dense_below_elements;
  rule.dense_one_dimensional = options.dense_one_dimensional;
  return rule;
}

Communicator::ModelInput Communicator::ModelInputFor(uint64_t elements) const {
  if (!options_.hierarchical) return {world_->size(), elements};
  return {cross_->size(), (elements + node_->size() - 1) / node_->size()};
}

ExchangeKind Communicator::KindFor(uint64_t elements) const {
  if (options_.exchange.has_value()) return *options_.exchange;  // Create checked it
  return ModelKindFor(elements);
}

ExchangeKind Communicator::ModelKindFor(uint64_t elements) const {
  const ModelInput in = ModelInputFor(elements);
  if (in.ranks < 2) return ExchangeKind::kSparseAllgather;
  // "none" on the compressed path: the fp32 frames' allgather, which a
  // caller asking for kCompressed with a lossless spec gets (the ring is
  // the kDense path).
  if (codec_->spec().method == Method::kNone) return ExchangeKind::kSparseAllgather;
  // The sparse allreduce only for the specs SparseAllreduce takes
  // (CompressionSpec::SelectsEntries), which Create gave one.
  const ExchangeKind kind = ChooseExchange(in.ranks, in.elements, codec_->spec(), model_);
  // Hierarchical: the cross-node stage is one of the sparse exchanges.
  if (options_.hierarchical && kind == ExchangeKind::kDenseRing) {
    return ExchangeKind::kSparseAllgather;
  }
  return kind;
}

bool Communicator::DenseRides(uint64_t elements, uint64_t dense_elements) const {
  const ExchangeKind kind = KindFor(elements);
  const int p = world_->size();
  // The allgather runs either way: the part's bytes in its frames against
  // a ring of the part (the comparison below, the allgather's own time
  // cancelled), the exchanger's dense-tail rule.
  if (kind == ExchangeKind::kSparseAllgather) return DenseRidesAllgather(p, dense_elements, model_);
  if (options_.exchange.has_value() || options_.hierarchical) return false;
  const CompressionSpec& spec = codec_->spec();
  const double ride =
      EstimateExchange(ExchangeKind::kSparseAllgather, p, elements, spec, model_).seconds() +
      DenseSectionSeconds(p, dense_elements, model_);
  const double apart =
      EstimateExchange(kind, p, elements, spec, model_).seconds() +
      EstimateExchange(ExchangeKind::kDenseRing, p, dense_elements, spec, model_).seconds();
  return ride <= apart;
}

bool Communicator::DenseTailRides(uint64_t elements, uint64_t dense_elements) const {
  const int p = world_->size();
  if (p < 2 || !CanStage(ExchangePath::kCompressed, elements) ||
      KindFor(elements) != ExchangeKind::kSparseAllgather) {
    return false;
  }
  return DenseRidesAllgather(p, dense_elements, model_);
}

ExchangePath Communicator::PathFor(uint64_t elements, bool one_dimensional) const {
  return path_rule().PathFor(elements, one_dimensional);
}

absl::Status Communicator::AgreeSessionKey() {
  GRADWIRE_ASSIGN_OR_RETURN(SessionAuth session, AgreeSessionAuth(*world_, auth_));
  chunk_auth_ = std::move(session.chunks);
  frame_auth_ = std::move(session.frames);
  return absl::OkStatus();
}

void Communicator::AddWire(const transport::GlooGroup& group, ExchangeStats* cost) const {
  cost->AddCall(group.last_call());
  // Sealing and verifying dense chunks happen inside the call: CPU work,
  // booked with the frames' MACs rather than as wire time.
  cost->auth_time += group.last_call().auth_time;
  cost->wire_time -= group.last_call().auth_time;
  if (&group == node_.get()) {
    cost->intra_node_bytes_sent += group.last_call().bytes_sent;
    cost->intra_node_bytes_received += group.last_call().bytes_received;
  }
}

absl::Status Communicator::Dense(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                 ExchangeStats* cost) {
  cost->dense_buckets = 1;
  if (DenseTakesTwoLevels(data.size())) return DenseHierarchical(bucket, step, data, cost);
  absl::Status s = world_->SealedAllreduceSum(data, *chunk_auth_, {step, bucket, kDenseStage});
  AddWire(*world_, cost);
  GRADWIRE_RETURN_IF_ERROR(s);
  Average(data, cost);
  return absl::OkStatus();
}

void Communicator::Average(absl::Span<float> data, ExchangeStats* cost) const {
  const absl::Time t0 = absl::Now();
  const float p = static_cast<float>(world_->size());
  for (float& x : data) x /= p;
  cost->compress_time += absl::Now() - t0;  // averaging: compute, not wire
}

absl::Status Communicator::AllreduceMean(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                         ExchangePath path) {
  return Exchange(bucket, step, data, {}, path);
}

absl::Status Communicator::AllreduceMeanWithDense(uint32_t bucket, uint64_t step,
                                                  absl::Span<float> data, absl::Span<float> dense) {
  return Exchange(bucket, step, data, dense, ExchangePath::kCompressed);
}

absl::Status Communicator::CheckUsable() const {
  if (poison_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("communicator poisoned by earlier failure: ", poison_.ToString()));
}

absl::Status Communicator::TakeStep(uint32_t bucket, uint64_t step) {
  auto [it, first] = last_step_.try_emplace(bucket, step);
  if (first) return absl::OkStatus();
  if (step <= it->second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, " of bucket ", bucket, " is not after its previous step ", it->second,
        ": frames are bound to their step, and a repeated step would accept a replayed one "
        "(steps must grow per bucket; RestoreState starts them afresh)"));
  }
  it->second = step;
  return absl::OkStatus();
}

absl::Status Communicator::Exchange(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                    absl::Span<float> dense, ExchangePath path) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  // Device memory would crash the host path: refused, poisoning nothing.
  for (absl::Span<const float> buffer : {data, dense}) {
    kernels::Location where = kernels::Location::kHost;
    if (!buffer.empty()) GRADWIRE_RETURN_IF_ERROR(kernels::Locate(buffer.data(), &where));
    if (where == kernels::Location::kDevice) {
      return absl::InvalidArgumentError(
          "AllreduceMean: data is device memory "
          "(use AllreduceMeanOnDevice)");
    }
  }
  GRADWIRE_RETURN_IF_ERROR(TakeStep(bucket, step));
  // The residual's key: the bucket id in decimal. AlphaNum formats into
  // its own buffer, so no allocation.
  const absl::AlphaNum key(bucket);
  ExchangeStats cost;
  absl::Status s;
  if (path == ExchangePath::kDense) {
    s = Dense(bucket, step, data, &cost);
  } else if (options_.exchange == ExchangeKind::kDenseRing && dense.empty()) {
    s = Dense(bucket, step, data, &cost);
  } else if (options_.exchange == ExchangeKind::kDenseRing) {
    // One ring over both parts, joined in a copy.
    EnsureSize(&work_, data.size() + dense.size());
    absl::Span<float> both = absl::MakeSpan(work_.data(), data.size() + dense.size());
    std::copy(data.begin(), data.end(), both.begin());
    std::copy(dense.begin(), dense.end(), both.begin() + data.size());
    s = Dense(bucket, step, both, &cost);
    if (s.ok()) {
      std::copy(both.begin(), both.begin() + data.size(), data.begin());
      std::copy(both.begin() + data.size(), both.end(), dense.begin());
    }
  } else if (options_.hierarchical) {
    // The dense part crosses the node links dense anyway: its own
    // allreduce first, then the compressed part.
    if (!dense.empty()) s = Dense(bucket, step, dense, &cost);
    if (s.ok()) s = Hierarchical(key.Piece(), bucket, step, data, &cost);
    cost.compressed_buckets = 1;
  } else {
    // A dense section rides only in the allgather's frames: there where
    // the model finds that no slower than its pick plus a ring of the
    // dense part (DenseRides), else the ring first.
    ExchangeKind kind = KindFor(data.size());
    const bool rides = !dense.empty() && DenseRides(data.size(), dense.size());
    if (rides) {
      kind = ExchangeKind::kSparseAllgather;
    } else if (!dense.empty()) {
      s = Dense(bucket, step, dense, &cost);
    }
    const float world = static_cast<float>(world_->size());
    if (!s.ok()) {
      // The dense part failed: nothing more to send.
    } else if (kind == ExchangeKind::kDenseRing) {
      s = Dense(bucket, step, data, &cost);
    } else if (kind == ExchangeKind::kSparseAllreduce) {
      s = sparse_allreduce_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, world, &cost);
    } else if (kind == ExchangeKind::kCastAllreduce) {
      s = cast_allreduce_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, world, &cost);
    } else {
      const absl::Span<float> section = rides ? dense : absl::Span<float>();
      s = flat_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, section, section, world,
                     &cost);
    }
  }
  cost.elements = s.ok() ? data.size() + dense.size() : 0;
  last_call_ = cost;
  totals_.Add(cost);
  if (!s.ok()) poison_ = s;
  return s;
}

absl::Span<const float> Communicator::Residual(uint32_t bucket) const {
  const absl::AlphaNum key(bucket);  // as in AllreduceMean: the residual's key
  return ef_.Residual(key.Piece());
}

absl::Status Communicator::EncodeStage(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                       absl::Span<const float> dense, StagedBucket& f,
                                       ExchangeStats* cost) {
  const absl::AlphaNum key(bucket);  // as in AllreduceMean: the residual's key
  f.kind = KindFor(data.size());
  if (!dense.empty() && f.kind != ExchangeKind::kSparseAllgather) {
    return absl::FailedPreconditionError(
        absl::StrCat("bucket ", bucket,
                     ": a dense part rides only in the sparse allgather's frames, and this "
                     "bucket takes the ",
                     ExchangeKindName(f.kind)));
  }
  switch (f.kind) {
    case ExchangeKind::kCastAllreduce:
      return cast_allreduce_->Prepare(*world_, ef_, key.Piece(), bucket, step, data, data, f.cast,
                                      cost);
    case ExchangeKind::kSparseAllreduce:
      return sparse_allreduce_->Prepare(ef_, key.Piece(), bucket, step, data, data, f.sparse, cost);
    case ExchangeKind::kSparseAllgather:
      return flat_->Encode(*world_, ef_, key.Piece(), bucket, step, data, dense, f.gather, cost);
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("bucket ", bucket, " takes the dense ring, which has no stages"));
  }
}

absl::Status Communicator::TransferStage(StagedBucket& f, ExchangeStats* cost) {
  const float world = static_cast<float>(world_->size());
  switch (f.kind) {
    case ExchangeKind::kCastAllreduce:
      return cast_allreduce_->Complete(*world_, f.cast, world, cost);
    case ExchangeKind::kSparseAllreduce:
      return sparse_allreduce_->Complete(*world_, f.sparse, world, cost);
    default:
      return flat_->Transfer(*world_, f.gather, cost);
  }
}

absl::Status Communicator::FinishStage(StagedBucket& f, absl::Span<float> data,
                                       absl::Span<float> dense, ExchangeStats* cost) {
  // The allreduces' TransferStage wrote the average.
  if (f.kind != ExchangeKind::kSparseAllgather) return absl::OkStatus();
  return flat_->Finish(*world_, f.gather, data, dense, static_cast<float>(world_->size()), cost);
}

absl::Status Communicator::Barrier() {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  absl::Status s = world_->Barrier();
  if (!s.ok()) poison_ = s;
  return s;
}

absl::Status Communicator::Close() {
  if (closed_) return absl::OkStatus();
  if (!poison_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "communicator not closed in order: poisoned by earlier failure: ", poison_.ToString()));
  }
  absl::Status result;
  for (transport::GlooGroup* g : {cross_.get(), node_.get(), world_.get()}) {
    if (g == nullptr) continue;
    absl::Status s = g->Close();
    if (result.ok()) result = s;
  }
  poison_ = result.ok() ? absl::FailedPreconditionError("communicator was closed") : result;
  closed_ = result.ok();
  return result;
}

absl::StatusOr<std::string> Communicator::SaveState() const {
  if (!poison_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "communicator poisoned by earlier failure, residuals not saved: ", poison_.ToString()));
  }
  std::string out = StartEnvelope(kMagic, kVersion);
  PutFixed32(&out, world_->size());
  PutFixed32(&out, world_->rank());
  PutFixed32(&out, options_.hierarchical ? 1 : 0);
  PutFixed32(&out, node_ != nullptr ? node_->size() : 1);
  PutLengthPrefixed32(&out, options_.compression.ToString());
  GRADWIRE_ASSIGN_OR_RETURN(const std::string ef, ef_.Save(options_.device_timeout));
  PutFixed64(&out, ef.size());
  PutBytes(&out, ef);
  SealEnvelope(&out);
  return out;
}

absl::Status Communicator::DivideResiduals(float divisor) {
  GRADWIRE_RETURN_IF_ERROR(CheckUsable());
  return ef_.DivideAll(divisor);
}

absl::Status Communicator::RestoreState(absl::string_view state) {
  GRADWIRE_RETURN_IF_ERROR(CheckUsable());
  GRADWIRE_ASSIGN_OR_RETURN(const Envelope envelope,
                            OpenEnvelope(state, kMagic, kVersion, kVersion, kWhat));
  ByteReader r(envelope.body, kWhat);
  uint32_t world = 0, rank = 0, hier = 0, node = 0;
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed32("world size", &world));
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed32("rank", &rank));
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed32("hierarchical", &hier));
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed32("node size", &node));
  const uint32_t my_node = node_ != nullptr ? node_->size() : 1;
  if (world != static_cast<uint32_t>(world_->size()) ||
      rank != static_cast<uint32_t>(world_->rank()) || hier != (options_.hierarchical ? 1u : 0u) ||
      node != my_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator checkpoint was saved by rank ", rank, " of ", world, " (",
        hier ? "hierarchical, " : "flat, ", node, " ranks per node); this is rank ", world_->rank(),
        " of ", world_->size(), " (", options_.hierarchical ? "hierarchical, " : "flat, ", my_node,
        " ranks per node): residuals are per rank and per shard layout"));
  }
  absl::string_view spec, ef;
  GRADWIRE_RETURN_IF_ERROR(r.ReadLengthPrefixed32("spec", &spec));
  if (spec != options_.compression.ToString()) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator checkpoint was saved with compression \"", spec,
                     "\", this communicator uses \"", options_.compression.ToString(), "\""));
  }
  uint64_t ef_len = 0;
  GRADWIRE_RETURN_IF_ERROR(r.ReadFixed64("residual section length", &ef_len));
  GRADWIRE_RETURN_IF_ERROR(r.ReadBytes("residual section", ef_len, &ef));
  GRADWIRE_RETURN_IF_ERROR(r.ExpectDone());
  GRADWIRE_RETURN_IF_ERROR(ef_.RestoreState(ef));
  last_step_.clear();  // a checkpoint's steps may come again
  return absl::OkStatus();
}

}  // namespace gradwire
