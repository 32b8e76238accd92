#include "gradwire/lib/comm/communicator.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace {

template <typename T>
void EnsureSize(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

// Checkpoint layout (little endian):
//   "GWCM" | u32 version | u32 world size | u32 rank | u32 hierarchical
//   | u32 node size | u32 spec_len | spec | u64 ef_len | ErrorFeedback state
//   | u64 XXH3-64 of everything before it
constexpr char kMagic[4] = {'G', 'W', 'C', 'M'};
constexpr uint32_t kVersion = 1;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLE(absl::string_view in, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[pos + i])} << (8 * i);
  return v;
}

}  // namespace

const char* ExchangePathName(ExchangePath path) {
  return path == ExchangePath::kDense ? "dense" : "compressed";
}

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
  absl::StatusOr<std::unique_ptr<Codec>> codec =
      MakeCodec(options.compression.ForSender(world->rank()));
  if (!codec.ok()) return codec.status();
  std::unique_ptr<Communicator> c(
      new Communicator(std::move(world), std::move(*codec), std::move(auth), options));
  c->flat_ = std::make_unique<SparseAllgather>(*c->codec_, c->auth_);
  if (SparseAllreduce::Supports(c->codec_->spec())) {
    c->sparse_allreduce_ = std::make_unique<SparseAllreduce>(*c->codec_, c->auth_);
  }
  GRADWIRE_ASSIGN_OR_RETURN(c->model_,
                            AgreeExchangeModel(*c->world_, options.exchange_model,
                                               options.measure_exchange_model, c->codec_.get()));
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
  c->across_nodes_ = std::make_unique<SparseAllgather>(*c->codec_, c->auth_);
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
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(secret, config.job_id);
  if (!auth.ok()) return auth.status();
  return Create(std::move(*world), config.node_id, config.local_world_size, std::move(*auth),
                options);
}

ExchangeKind Communicator::KindFor(uint64_t elements) const {
  if (!options_.choose_exchange || sparse_allreduce_ == nullptr) {
    return ExchangeKind::kSparseAllgather;
  }
  if (!options_.hierarchical) {
    if (world_->size() < 2) return ExchangeKind::kSparseAllgather;
    return ChooseExchange(world_->size(), elements, codec_->spec(), model_);
  }
  // Hierarchical: the cross-node stage averages one node shard.
  const uint64_t shard = (elements + node_->size() - 1) / node_->size();
  if (cross_->size() < 2 || ChooseExchange(cross_->size(), shard, codec_->spec(), model_) !=
                                ExchangeKind::kSparseAllreduce) {
    return ExchangeKind::kSparseAllgather;
  }
  return ExchangeKind::kSparseAllreduce;
}

ExchangePath Communicator::PathFor(uint64_t elements, bool one_dimensional) const {
  if (options_.compression.method == Method::kNone) return ExchangePath::kDense;
  if (elements < options_.dense_below_elements) return ExchangePath::kDense;
  if (one_dimensional && options_.dense_one_dimensional) return ExchangePath::kDense;
  return ExchangePath::kCompressed;
}

void Communicator::AddWire(const transport::GlooGroup& group, ExchangeStats* cost) const {
  cost->AddCall(group.last_call());
  if (&group == node_.get()) {
    cost->intra_node_bytes_sent += group.last_call().bytes_sent;
    cost->intra_node_bytes_received += group.last_call().bytes_received;
  }
}

absl::Status Communicator::Dense(absl::Span<float> data, ExchangeStats* cost) {
  absl::Status s = world_->AllreduceSum(data, options_.dense_algorithm);
  AddWire(*world_, cost);
  GRADWIRE_RETURN_IF_ERROR(s);
  const absl::Time t0 = absl::Now();
  const float p = static_cast<float>(world_->size());
  for (float& x : data) x /= p;
  cost->compress_time += absl::Now() - t0;  // averaging: compute, not wire
  cost->dense_buckets = 1;
  return absl::OkStatus();
}

absl::Status Communicator::Hierarchical(absl::string_view key, uint32_t bucket, uint64_t step,
                                        absl::Span<float> data, ExchangeStats* cost) {
  const uint64_t n = data.size();
  GRADWIRE_RETURN_IF_ERROR(flat_->Agree(*world_, bucket, step, n, cost));
  const int local = node_->size();
  const int me = node_->rank();
  // Shards of ceil(n / local) elements; the last ones take what is left
  // (possibly nothing when n < local).
  const uint64_t shard = (n + local - 1) / local;
  for (int r = 0; r < local; ++r) {
    const uint64_t begin = std::min<uint64_t>(n, r * shard);
    shards_[r] = std::min<uint64_t>(shard, n - begin);
  }
  // 1. Dense reduce-scatter inside the node, on a copy: the caller's data
  // must stay intact until the exchange has succeeded.
  EnsureSize(&work_, n);
  absl::Span<float> work = absl::MakeSpan(work_.data(), n);
  std::copy(data.begin(), data.end(), work.begin());
  if (local > 1) {
    absl::Status s = node_->ReduceScatterSum(work, shards_);
    AddWire(*node_, cost);
    GRADWIRE_RETURN_IF_ERROR(s);
  }
  // 2-3. Compress my shard of the node's sum and average it across nodes.
  absl::Span<float> mine = work.subspan(0, shards_[me]);
  // Every rank of the cross group holds a shard of the same size: the
  // same choice.
  const float world = static_cast<float>(world_->size());
  absl::Status cross =
      KindFor(n) == ExchangeKind::kSparseAllreduce
          ? sparse_allreduce_->Run(*cross_, ef_, key, bucket, step, mine, mine, world, cost)
          : across_nodes_->Run(*cross_, ef_, key, bucket, step, mine, mine, world, cost);
  if (local == 1) {
    GRADWIRE_RETURN_IF_ERROR(cross);
    std::copy(mine.begin(), mine.end(), data.begin());
    return absl::OkStatus();
  }
  // Each cross-node group sees only its own failures (say, a forged frame
  // in local rank 1's group): share the verdict inside the node, so every
  // rank reports the failure instead of waiting for peers that gave up.
  EnsureSize(&verdicts_, local);
  absl::Status s = node_->AllgatherU64(static_cast<uint64_t>(cross.code()),
                                       absl::MakeSpan(verdicts_.data(), local));
  AddWire(*node_, cost);
  GRADWIRE_RETURN_IF_ERROR(cross);
  GRADWIRE_RETURN_IF_ERROR(s);
  for (int r = 0; r < local; ++r) {
    if (verdicts_[r] != 0) {
      return absl::Status(
          static_cast<absl::StatusCode>(verdicts_[r]),
          absl::StrCat("rank ", node_->world_ranks()[r], " of this node failed the cross-node ",
                       "exchange of bucket ", bucket, " step ", step, " (",
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(verdicts_[r])),
                       "; see its log): the node discards the result"));
    }
  }
  // 4. Every rank of the node gets every averaged shard.
  for (int r = 0; r < local; ++r) shards_[r] *= sizeof(float);
  s = node_->Allgatherv(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(mine.data()), mine.size() * 4), shards_,
      absl::MakeSpan(reinterpret_cast<uint8_t*>(data.data()), n * sizeof(float)));
  AddWire(*node_, cost);
  return s;
}

absl::Status Communicator::AllreduceMean(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                         ExchangePath path) {
  return Exchange(bucket, step, data, {}, path);
}

absl::Status Communicator::AllreduceMeanWithDense(uint32_t bucket, uint64_t step,
                                                   absl::Span<float> data,
                                                   absl::Span<float> dense) {
  return Exchange(bucket, step, data, dense, ExchangePath::kCompressed);
}

absl::Status Communicator::CheckUsable() const {
  if (poison_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("communicator poisoned by earlier failure: ", poison_.ToString()));
}

absl::Status Communicator::Exchange(uint32_t bucket, uint64_t step, absl::Span<float> data,
                                    absl::Span<float> dense, ExchangePath path) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  // The residual's key: the bucket id in decimal. AlphaNum formats into
  // its own buffer, so no allocation.
  const absl::AlphaNum key(bucket);
  ExchangeStats cost;
  absl::Status s;
  if (path == ExchangePath::kDense) {
    s = Dense(data, &cost);
  } else if (options_.hierarchical) {
    // The dense part crosses the node links dense anyway: its own
    // allreduce first, then the compressed part.
    if (!dense.empty()) s = Dense(dense, &cost);
    if (s.ok()) s = Hierarchical(key.Piece(), bucket, step, data, &cost);
    cost.compressed_buckets = 1;
  } else {
    // A dense section rides only in the allgather's frames.
    const ExchangeKind kind = dense.empty() ? KindFor(data.size()) : ExchangeKind::kSparseAllgather;
    const float world = static_cast<float>(world_->size());
    if (kind == ExchangeKind::kDenseRing) {
      s = Dense(data, &cost);
    } else if (kind == ExchangeKind::kSparseAllreduce) {
      s = sparse_allreduce_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, world, &cost);
    } else {
      s = flat_->Run(*world_, ef_, key.Piece(), bucket, step, data, data, dense, dense, world,
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

absl::Status Communicator::EncodeStage(uint32_t bucket, uint64_t step,
                                       absl::Span<const float> data,
                                       SparseAllgather::InFlight& f, ExchangeStats* cost) {
  const absl::AlphaNum key(bucket);  // as in AllreduceMean: the residual's key
  return flat_->Encode(*world_, ef_, key.Piece(), bucket, step, data, f, cost);
}

absl::Status Communicator::TransferStage(SparseAllgather::InFlight& f, ExchangeStats* cost) {
  return flat_->Transfer(*world_, f, cost);
}

absl::Status Communicator::FinishStage(SparseAllgather::InFlight& f, absl::Span<float> data,
                                       ExchangeStats* cost) {
  return flat_->Finish(*world_, f, data, static_cast<float>(world_->size()), cost);
}

absl::Status Communicator::Barrier() {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  absl::Status s = world_->Barrier();
  if (!s.ok()) poison_ = s;
  return s;
}

absl::Status Communicator::Close() {
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
  return result;
}

absl::StatusOr<std::string> Communicator::SaveState() const {
  if (!poison_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "communicator poisoned by earlier failure, residuals not saved: ", poison_.ToString()));
  }
  std::string out(kMagic, sizeof kMagic);
  PutU32(&out, kVersion);
  PutU32(&out, world_->size());
  PutU32(&out, world_->rank());
  PutU32(&out, options_.hierarchical ? 1 : 0);
  PutU32(&out, node_ != nullptr ? node_->size() : 1);
  const std::string spec = options_.compression.ToString();
  PutU32(&out, spec.size());
  out += spec;
  const std::string ef = ef_.SaveState();
  PutU64(&out, ef.size());
  out += ef;
  PutU64(&out, XXH3_64bits(out.data(), out.size()));
  return out;
}

absl::Status Communicator::RestoreState(absl::string_view state) {
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  constexpr size_t kFixed = 4 + 6 * 4;
  if (state.size() < kFixed + 16 || std::memcmp(state.data(), kMagic, 4) != 0) {
    return absl::InvalidArgumentError(
        "not a communicator checkpoint (missing \"GWCM\" magic or too short)");
  }
  const uint64_t stored = GetLE(state, state.size() - 8, 8);
  if (stored != XXH3_64bits(state.data(), state.size() - 8)) {
    return absl::DataLossError("communicator checkpoint is corrupt (checksum mismatch)");
  }
  const uint32_t version = GetLE(state, 4, 4);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator checkpoint version ", version, ", expected ", kVersion));
  }
  const uint32_t world = GetLE(state, 8, 4), rank = GetLE(state, 12, 4);
  const uint32_t hier = GetLE(state, 16, 4), node = GetLE(state, 20, 4);
  const uint64_t spec_len = GetLE(state, 24, 4);
  const uint32_t my_node = node_ != nullptr ? node_->size() : 1;
  if (world != static_cast<uint32_t>(world_->size()) ||
      rank != static_cast<uint32_t>(world_->rank()) || hier != (options_.hierarchical ? 1u : 0u) ||
      node != my_node) {
    return absl::FailedPreconditionError(absl::StrCat(
        "communicator checkpoint was saved by rank ", rank, " of ", world, " (",
        hier ? "hierarchical, " : "flat, ", node, " ranks per node); this is rank ", world_->rank(),
        " of ", world_->size(), " (", options_.hierarchical ? "hierarchical, " : "flat, ", my_node,
        " ranks per node): residuals are per rank and per shard layout"));
  }
  if (state.size() - 8 < kFixed + spec_len + 8) {
    return absl::InvalidArgumentError("communicator checkpoint truncated in its spec");
  }
  const absl::string_view spec = state.substr(kFixed, spec_len);
  if (spec != options_.compression.ToString()) {
    return absl::FailedPreconditionError(
        absl::StrCat("communicator checkpoint was saved with compression \"", spec,
                     "\", this communicator uses \"", options_.compression.ToString(), "\""));
  }
  const uint64_t ef_len = GetLE(state, kFixed + spec_len, 8);
  if (ef_len != state.size() - 8 - (kFixed + spec_len + 8)) {
    return absl::InvalidArgumentError("communicator checkpoint: residual section length is wrong");
  }
  return ef_.RestoreState(state.substr(kFixed + spec_len + 8, ef_len));
}

}  // namespace gradwire
