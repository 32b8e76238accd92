#include "gradwire/lib/comm/cast_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/lib/codec/wire_format.h"
#include "gradwire/lib/comm/exchange_agreement.h"
#include "gradwire/lib/comm/region_frame.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

using transport::SparseCollectives;

ValueType CastType(const CompressionSpec& spec) {
  return spec.method == Method::kBf16 ? ValueType::kBf16 : ValueType::kFp16;
}

kernels::ValueFormat Format(ValueType type) { return static_cast<kernels::ValueFormat>(type); }

RegionExpectation Expect(ValueType type, int j, const std::vector<uint64_t>& bounds) {
  RegionExpectation want;
  want.kind = RegionFrameKind::kContribution;
  want.value_type = type;
  want.sparse = RegionLayout::kImplied;
  want.region = j;
  want.begin = bounds[j];
  want.length = bounds[j + 1] - bounds[j];
  want.implied_count = want.length;
  return want;
}

}  // namespace

bool CastAllreduce::Supports(const CompressionSpec& spec) { return spec.CastsTo16Bits(); }

CastAllreduce::CastAllreduce(const Codec& codec, const FrameAuthenticator& auth,
                             const transport::ChunkAuthenticator& chunk_auth,
                             const CastAllreduceOptions& options)
    : codec_(codec),
      chunk_auth_(chunk_auth),
      options_(options),
      naming_(codec, auth),
      spec_fingerprint_(SpecFingerprint(codec.spec())) {}

absl::Status CastAllreduce::Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                  uint64_t n, ExchangeStats* cost) {
  const uint64_t fields[] = {spec_fingerprint_, n, step, bucket};
  uint32_t unequal = 0;
  GRADWIRE_RETURN_IF_ERROR(AgreeOnFields(group, fields, &agreed_, &unequal, cost));
  if (unequal == 0) return absl::OkStatus();
  // Every rank saw it: gather the descriptors once more to name ranks.
  GRADWIRE_RETURN_IF_ERROR(naming_.Agree(group, bucket, step, n, cost));
  return absl::InvalidArgumentError(
      absl::StrCat("collective mismatch in cast allreduce (bucket ", bucket, ", step ", step,
                   "): ranks disagree on spec, length, step or bucket"));
}

void CastAllreduce::Context(const transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                            int sealer, int j, uint8_t* out) const {
  transport::SealedChunkContext c;
  c.scope = {step, bucket, options_.contribution_stage};
  c.group_size = static_cast<uint32_t>(group.size());
  c.phase = transport::SealedChunkContext::kDirectMessage;
  c.sealer = static_cast<uint32_t>(sealer);
  c.chunk = static_cast<uint32_t>(j);
  c.offset = bounds_[j];
  c.elements = counts_[j];
  c.EncodeTo(out);
}

absl::Status CastAllreduce::Scatter(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                    ExchangeStats* cost) {
  const int p = group.size();
  const int me = group.rank();
  const ValueType type = CastType(codec_.spec());
  const uint64_t width = ValueBytes(type);
  const uint64_t trailer = chunk_auth_.trailer_bytes();
  caps_.resize(p);
  uint64_t total = 0;
  for (int j = 0; j < p; ++j) {
    total += caps_[j] = kRegionHeaderBytes + counts_[j] * width + trailer;
  }
  send_.resize(total);
  blocks_.resize(p);
  received_.resize(p);
  uint8_t context[transport::SealedChunkContext::kBytes];
  absl::Time t0 = absl::Now();
  uint64_t at = 0;
  for (int j = 0; j < p; ++j) {
    blocks_[j] = {};
    if (j == me) continue;  // my own region stays here
    RegionFrameHeader h;
    h.kind = RegionFrameKind::kContribution;
    h.value_type = type;
    h.region = j;
    h.begin = bounds_[j];
    h.length = counts_[j];
    uint8_t* frame = send_.data() + at;
    absl::StatusOr<size_t> written =
        WriteRegionFrame(h, RegionLayout::kImplied,
                         RegionEntries{nullptr, my_values_ + bounds_[j] * width, counts_[j]},
                         absl::MakeSpan(frame, caps_[j] - trailer));
    if (!written.ok()) return written.status();
    const absl::Time t1 = absl::Now();
    cost->compress_time += t1 - t0;
    Context(group, bucket, step, group.world_ranks()[me], j, context);
    absl::Status sealed =
        chunk_auth_.Seal(context, absl::MakeConstSpan(frame, *written), frame + *written);
    t0 = absl::Now();
    cost->auth_time += t0 - t1;
    if (!sealed.ok()) return sealed;
    if (j == options_.corrupt_contribution_to_for_test) frame[kRegionHeaderBytes / 2] ^= 1;
    blocks_[j] = absl::MakeConstSpan(frame, *written + trailer);
    at += caps_[j];
  }
  // One flow into each link at a time: the blocks are bulk (2n/P bytes).
  absl::Status s = SparseCollectives::AlltoallvBounded(group, blocks_, caps_, &scratch_,
                                                       absl::MakeSpan(received_), 1);
  cost->AddCall(group.last_call());
  return s;
}

absl::Status CastAllreduce::Reduce(const transport::GlooGroup& group, uint32_t bucket,
                                   uint64_t step, float divisor, ExchangeStats* cost) {
  const int p = group.size();
  const int me = group.rank();
  const ValueType type = CastType(codec_.spec());
  const RegionExpectation want = Expect(type, me, bounds_);
  const uint64_t trailer = chunk_auth_.trailer_bytes();
  uint8_t context[transport::SealedChunkContext::kBytes];
  values_.resize(p);
  for (int r = 0; r < p; ++r) {
    if (r == me) {
      values_[r] = my_values_ + bounds_[me] * ValueBytes(type);
      continue;
    }
    const int sender = group.world_ranks()[r];
    const absl::Span<const uint8_t> block = received_[r];
    const absl::Time t0 = absl::Now();
    absl::Status s;
    if (block.size() < trailer) {
      s = absl::InvalidArgumentError(
          absl::StrCat(block.size(), " bytes, shorter than the chunk trailer"));
    } else {
      Context(group, bucket, step, sender, me, context);
      s = chunk_auth_.Verify(context, block.first(block.size() - trailer),
                             block.data() + block.size() - trailer);
    }
    const absl::Time t1 = absl::Now();
    cost->auth_time += t1 - t0;
    if (s.ok()) {
      absl::StatusOr<RegionFrameView> view =
          ParseRegionFrame(block.first(block.size() - trailer), want, &no_indices_);
      s = view.status();
      if (s.ok()) values_[r] = view->values.data();
    }
    cost->compress_time += absl::Now() - t1;
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("contribution from rank ", sender, " (bucket ", bucket, ", step ",
                                 step, ") rejected: ", s.message()));
    }
  }
  const absl::Time t2 = absl::Now();
  avg_.resize(counts_[me]);
  absl::Status s =
      kernels::CastDecodeAverage(values_, counts_[me], Format(type), divisor, avg_.data());
  cost->compress_time += absl::Now() - t2;
  return s;
}

absl::Status CastAllreduce::Verdict(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                    const absl::Status& mine, ExchangeStats* cost) {
  const int p = group.size();
  verdicts_.assign(p, 0);
  verdicts_[group.rank()] = static_cast<uint32_t>(mine.code());
  absl::Status s =
      SparseCollectives::AllreduceU32(group, absl::MakeSpan(verdicts_), transport::ReduceOp::kSum);
  cost->AddCall(group.last_call());
  GRADWIRE_RETURN_IF_ERROR(s);
  if (!mine.ok()) return mine;  // the precise reason, here
  for (int j = 0; j < p; ++j) {
    if (verdicts_[j] == 0) continue;
    const auto code = static_cast<absl::StatusCode>(verdicts_[j]);
    return absl::Status(code, absl::StrCat("rank ", group.world_ranks()[j], ", owner of region ", j,
                                           ", rejected a contribution (bucket ", bucket, ", step ",
                                           step, "; ", absl::StatusCodeToString(code),
                                           "; see its log): every rank discards the result"));
  }
  return absl::OkStatus();
}

absl::Status CastAllreduce::Run(transport::GlooGroup& group, ErrorFeedback& ef,
                                absl::string_view key, uint32_t bucket, uint64_t step,
                                absl::Span<const float> in, absl::Span<float> out, float divisor,
                                ExchangeStats* stats) {
  const uint64_t n = in.size();
  if (out.size() != n || n >= (uint64_t{1} << 32) || !Supports(codec_.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cast allreduce: ", n, " elements in, ", out.size(), " out, codec \"",
        codec_.spec().ToString(), "\" (needs equal lengths below 2^32 and fp16 or bf16)"));
  }
  ExchangeStats cost;
  auto finish = [&](absl::Status s) {
    if (s.ok()) {
      cost.compressed_buckets = 1;
      cost.cast_allreduce_buckets = 1;
      cost.elements = n;
    }
    if (stats != nullptr) stats->Add(cost);
    return s;
  };
  const int p = group.size();
  bounds_.resize(p + 1);
  counts_.resize(p);
  for (int j = 0; j <= p; ++j) bounds_[j] = j * n / p;
  for (int j = 0; j < p; ++j) counts_[j] = bounds_[j + 1] - bounds_[j];

  // 1. Encode; the frame's values section holds one value per element.
  const absl::Time t0 = absl::Now();
  frame_.resize(codec_.MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> encoded = ef.Encode(key, in, step, absl::MakeSpan(frame_));
  if (!encoded.ok()) return finish(encoded.status());
  absl::StatusOr<ParsedFrame> parsed =
      ParseFrame(absl::MakeConstSpan(frame_.data(), encoded->frame_bytes), FrameLimits());
  if (!parsed.ok()) return finish(parsed.status());
  my_values_ = parsed->sections.values.data();
  cost.compress_time += absl::Now() - t0;

  // 2-5. The collectives; an owner's complaint travels in the verdict.
  absl::Status s = Agree(group, bucket, step, n, &cost);
  if (s.ok()) s = Scatter(group, bucket, step, &cost);
  if (!s.ok()) return finish(s);
  s = Verdict(group, bucket, step, Reduce(group, bucket, step, divisor, &cost), &cost);
  if (!s.ok()) return finish(s);

  // 6. Every region's average reaches every rank.
  const int me = group.rank();
  std::copy(avg_.begin(), avg_.end(), out.begin() + bounds_[me]);
  s = group.SealedAllgather(out, counts_, chunk_auth_, {step, bucket, options_.allgather_stage});
  cost.AddCall(group.last_call());
  cost.auth_time += group.last_call().auth_time;
  cost.wire_time -= group.last_call().auth_time;
  return finish(s);
}

}  // namespace gradwire
