#include "gradwire/lib/comm/cast_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/kernels/element_math.h"
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

CastAllreduce::CastAllreduce(const Codec& codec, const FrameSigner& auth,
                             const transport::ChunkAuthenticator& chunk_auth,
                             const CastAllreduceOptions& options)
    : codec_(codec),
      chunk_auth_(chunk_auth),
      options_(options),
      naming_(codec, auth),
      spec_fingerprint_(SpecFingerprint(codec.spec())) {}

absl::Status CastAllreduce::Agree(transport::GlooGroup& group, const Staged& st,
                                  ExchangeStats* cost) {
  const uint64_t fields[] = {spec_fingerprint_, st.n, st.step, st.bucket};
  uint32_t unequal = 0;
  GRADWIRE_RETURN_IF_ERROR(AgreeOnFields(group, fields, &agreed_, &unequal, cost));
  if (unequal == 0) return absl::OkStatus();
  // Every rank saw it: gather the descriptors once more to name ranks.
  GRADWIRE_RETURN_IF_ERROR(naming_.Agree(group, st.bucket, st.step, st.n, cost));
  return absl::InvalidArgumentError(
      absl::StrCat("collective mismatch in cast allreduce (bucket ", st.bucket, ", step ", st.step,
                   "): ranks disagree on spec, length, step or bucket"));
}

void CastAllreduce::Context(int group_size, const Staged& st, int sealer, int j,
                            uint8_t* out) const {
  transport::SealedChunkContext c;
  c.scope = {st.step, st.bucket, options_.contribution_stage};
  c.group_size = static_cast<uint32_t>(group_size);
  c.phase = transport::SealedChunkContext::kDirectMessage;
  c.sealer = static_cast<uint32_t>(sealer);
  c.chunk = static_cast<uint32_t>(j);
  c.offset = st.bounds[j];
  c.elements = st.counts[j];
  c.EncodeTo(out);
}

absl::Status CastAllreduce::Prepare(const transport::GlooGroup& group, ErrorFeedback& ef,
                                    absl::string_view key, uint32_t bucket, uint64_t step,
                                    absl::Span<const float> in, absl::Span<float> out, Staged& st,
                                    ExchangeStats* stats) {
  const uint64_t n = in.size();
  if (out.size() != n || n >= (uint64_t{1} << 32) || !Supports(codec_.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cast allreduce: ", n, " elements in, ", out.size(), " out, codec \"",
        codec_.spec().ToString(), "\" (needs equal lengths below 2^32 and fp16 or bf16)"));
  }
  ExchangeStats cost;
  const int p = group.size();
  const int me = group.rank();
  st.bucket = bucket;
  st.step = step;
  st.n = n;
  st.out = out;
  EvenRegions(n, p, &st.bounds);
  st.counts.resize(p);
  for (int j = 0; j < p; ++j) st.counts[j] = st.bounds[j + 1] - st.bounds[j];

  // 1. Encode; the frame's values section holds one value per element.
  absl::Time t0 = absl::Now();
  st.frame.resize(codec_.MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> encoded = ef.Encode(key, in, step, absl::MakeSpan(st.frame));
  absl::Status s = encoded.status();
  if (s.ok()) cost.nonfinite += encoded->nonfinite;
  // Where Complete adds the rounding of this rank's region's average (no
  // residual: error feedback off, the rounding is dropped).
  st.residual = ef.MutableHostResidual(key);
  if (s.ok()) {
    FrameLimits own;  // just encoded here: the checksum would re-read it
    own.integrity = FrameIntegrity::kVerifiedByCaller;
    absl::StatusOr<ParsedFrame> parsed =
        ParseFrame(absl::MakeConstSpan(st.frame.data(), encoded->frame_bytes), own);
    s = parsed.status();
    if (s.ok()) st.values = parsed->sections.values.data();
  }
  if (!s.ok()) {
    if (stats != nullptr) stats->Add(cost);
    return s;
  }

  // 3, this rank's half: a sealed region frame per other owner.
  const ValueType type = CastType(codec_.spec());
  const uint64_t width = ValueBytes(type);
  const uint64_t trailer = chunk_auth_.trailer_bytes();
  st.caps.resize(p);
  uint64_t total = 0;
  for (int j = 0; j < p; ++j) {
    total += st.caps[j] = kRegionHeaderBytes + st.counts[j] * width + trailer;
  }
  st.send.resize(total);
  st.blocks.resize(p);
  uint8_t context[transport::SealedChunkContext::kBytes];
  uint64_t at = 0;
  for (int j = 0; j < p && s.ok(); ++j) {
    st.blocks[j] = {};
    if (j == me) continue;  // my own region stays here
    RegionFrameHeader h;
    h.kind = RegionFrameKind::kContribution;
    h.value_type = type;
    h.region = j;
    h.begin = st.bounds[j];
    h.length = st.counts[j];
    uint8_t* frame = st.send.data() + at;
    absl::StatusOr<size_t> written =
        WriteRegionFrame(h, RegionLayout::kImplied,
                         RegionEntries{nullptr, st.values + st.bounds[j] * width, st.counts[j]},
                         absl::MakeSpan(frame, st.caps[j] - trailer));
    s = written.status();
    if (!s.ok()) break;
    const absl::Time t1 = absl::Now();
    cost.compress_time += t1 - t0;
    Context(p, st, group.world_ranks()[me], j, context);
    s = chunk_auth_.Seal(context, absl::MakeConstSpan(frame, *written), frame + *written);
    t0 = absl::Now();
    cost.auth_time += t0 - t1;
    if (j == options_.corrupt_contribution_to_for_test) frame[kRegionHeaderBytes / 2] ^= 1;
    st.blocks[j] = absl::MakeConstSpan(frame, *written + trailer);
    at += st.caps[j];
  }
  cost.compress_time += absl::Now() - t0;
  if (stats != nullptr) stats->Add(cost);
  return s;
}

absl::Status CastAllreduce::Reduce(const transport::GlooGroup& group, const Staged& st,
                                   float divisor, ExchangeStats* cost) {
  const int p = group.size();
  const int me = group.rank();
  const ValueType type = CastType(codec_.spec());
  const RegionExpectation want = Expect(type, me, st.bounds);
  const uint64_t trailer = chunk_auth_.trailer_bytes();
  uint8_t context[transport::SealedChunkContext::kBytes];
  values_.resize(p);
  for (int r = 0; r < p; ++r) {
    if (r == me) {
      values_[r] = st.values + st.bounds[me] * ValueBytes(type);
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
      Context(p, st, sender, me, context);
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
      return absl::Status(s.code(),
                          absl::StrCat("contribution from rank ", sender, " (bucket ", st.bucket,
                                       ", step ", st.step, ") rejected: ", s.message()));
    }
  }
  const absl::Time t2 = absl::Now();
  avg_.resize(st.counts[me]);
  absl::Status s =
      kernels::CastDecodeAverage(values_, st.counts[me], Format(type), divisor, avg_.data());
  cost->compress_time += absl::Now() - t2;
  return s;
}

absl::Status CastAllreduce::Verdict(transport::GlooGroup& group, const Staged& st,
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
                                           ", rejected a contribution (bucket ", st.bucket,
                                           ", step ", st.step, "; ", absl::StatusCodeToString(code),
                                           "; see its log): every rank discards the result"));
  }
  return absl::OkStatus();
}

absl::Status CastAllreduce::Complete(transport::GlooGroup& group, Staged& st, float divisor,
                                     ExchangeStats* stats) {
  ExchangeStats cost;
  auto finish = [&](absl::Status s) {
    if (s.ok()) {
      cost.compressed_buckets = 1;
      cost.cast_allreduce_buckets = 1;
      cost.elements = st.n;
    }
    if (stats != nullptr) stats->Add(cost);
    return s;
  };
  const int p = group.size();
  if (st.bounds.size() != static_cast<size_t>(p) + 1) {
    return finish(absl::FailedPreconditionError("cast allreduce: bucket not prepared"));
  }
  // 2-5. The collectives; an owner's complaint travels in the verdict.
  absl::Status s = Agree(group, st, &cost);
  if (s.ok()) {
    // One flow into each link at a time: the blocks are bulk (2n/P bytes).
    received_.resize(p);
    s = SparseCollectives::AlltoallvBounded(group, st.blocks, st.caps, &scratch_,
                                            absl::MakeSpan(received_), 1);
    cost.AddCall(group.last_call());
  }
  if (!s.ok()) return finish(s);
  s = Verdict(group, st, Reduce(group, st, divisor, &cost), &cost);
  if (!s.ok()) return finish(s);

  // 6. The owner rounds its region's averages to the cast's format; every
  // region's rounded averages reach every rank, which decodes them; the
  // owner keeps what its rounding lost, times the divisor, in its residual.
  const absl::Time t0 = absl::Now();
  s = RoundAverages(group, st);
  cost.compress_time += absl::Now() - t0;
  if (!s.ok()) return finish(s);
  s = group.SealedAllgather(absl::MakeSpan(packed_), slot_counts_, chunk_auth_,
                            {st.step, st.bucket, options_.allgather_stage});
  cost.AddCall(group.last_call());
  cost.auth_time += group.last_call().auth_time;
  cost.wire_time -= group.last_call().auth_time;
  if (!s.ok()) return finish(s);
  const absl::Time t1 = absl::Now();
  s = DecodeAverages(group, st, divisor);
  cost.compress_time += absl::Now() - t1;
  return finish(s);
}

absl::Status CastAllreduce::RoundAverages(const transport::GlooGroup& group, const Staged& st) {
  const int p = group.size();
  const int me = group.rank();
  slot_counts_.resize(p);
  slot_begin_.assign(p + 1, 0);
  for (int j = 0; j < p; ++j) {
    slot_counts_[j] = (st.counts[j] + 1) / 2;  // two 16-bit values a slot
    slot_begin_[j + 1] = slot_begin_[j] + slot_counts_[j];
  }
  packed_.resize(slot_begin_[p]);
  const uint64_t count = st.counts[me];
  rounding_.assign(count, 0.0f);
  if (count == 0) return absl::OkStatus();
  packed_[slot_begin_[me + 1] - 1] = 0.0f;  // an odd region's last two bytes
  return kernels::CastCompress(
      avg_.data(), rounding_.data(), count, Format(CastType(codec_.spec())),
      reinterpret_cast<uint8_t*>(packed_.data() + slot_begin_[me]), nullptr);
}

absl::Status CastAllreduce::DecodeAverages(const transport::GlooGroup& group, const Staged& st,
                                           float divisor) {
  const int p = group.size();
  const kernels::ValueFormat format = Format(CastType(codec_.spec()));
  for (int j = 0; j < p; ++j) {
    if (st.counts[j] == 0) continue;
    const uint8_t* values = reinterpret_cast<const uint8_t*>(packed_.data() + slot_begin_[j]);
    // (0 + v) / 1: the value's fp32 decoding, as the casts' decode-average.
    GRADWIRE_RETURN_IF_ERROR(kernels::CastDecodeAverage(
        absl::MakeConstSpan(&values, 1), st.counts[j], format, 1.0f, st.out.data() + st.bounds[j]));
  }
  if (st.residual.empty()) return absl::OkStatus();
  // Server-side error feedback: out lost `rounding` of the average, i.e.
  // divisor * rounding of the sum, which this rank contributes next step.
  float* e = st.residual.data() + st.bounds[group.rank()];
  for (size_t i = 0; i < rounding_.size(); ++i) {
    e[i] = kernels::ResidualAfter(e[i], -(divisor * rounding_[i]));
  }
  return absl::OkStatus();
}

absl::Status CastAllreduce::Run(transport::GlooGroup& group, ErrorFeedback& ef,
                                absl::string_view key, uint32_t bucket, uint64_t step,
                                absl::Span<const float> in, absl::Span<float> out, float divisor,
                                ExchangeStats* stats) {
  GRADWIRE_RETURN_IF_ERROR(Prepare(group, ef, key, bucket, step, in, out, run_, stats));
  return Complete(group, run_, divisor, stats);
}

}  // namespace gradwire
