#include "gradwire/lib/comm/sparse_allreduce.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/dispatch.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/comm/exchange_agreement.h"
#include "gradwire/lib/comm/global_selection.h"
#include "gradwire/lib/comm/sparse_allreduce_internal.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

using transport::SparseCollectives;

// The agreed words: spec fingerprint, n, step, bucket (must agree), the
// region plan's hash (may differ: even regions then), and whether the
// rank's input was non-finite (a flag: any rank's counts).
constexpr int kAgreedFields = 6;
constexpr int kPlanField = 4;
constexpr int kNonFiniteField = 5;

}  // namespace

using sparse_allreduce_internal::Format;
using sparse_allreduce_internal::IsZero;
using sparse_allreduce_internal::Rejected;

bool SparseAllreduce::Supports(const CompressionSpec& spec) { return spec.SelectsEntries(); }

SparseAllreduce::SparseAllreduce(const Codec& codec, const FrameSigner& auth,
                                 const SparseAllreduceOptions& options)
    : codec_(codec),
      auth_(auth),
      options_(options),
      naming_(codec, auth),
      spec_fingerprint_(SpecFingerprint(codec.spec())),
      random_k_(codec.spec().method == Method::kRandomK),
      sparse_layout_(random_k_ ? RegionLayout::kImplied
                               : static_cast<RegionLayout>(codec.spec().indices)),
      value_type_(codec.spec().values) {}

absl::Status SparseAllreduce::SetRegions(uint32_t bucket, std::vector<uint64_t> bounds) {
  bool ok = bounds.size() >= 2 && bounds[0] == 0;
  for (size_t j = 1; ok && j < bounds.size(); ++j) ok = bounds[j] >= bounds[j - 1];
  if (!ok) {
    return absl::InvalidArgumentError(
        "sparse allreduce regions must be P + 1 non-decreasing boundaries from 0 to n");
  }
  plans_[bucket] = std::move(bounds);
  return absl::OkStatus();
}

RegionExpectation SparseAllreduce::Expect(RegionFrameKind kind, int j) const {
  RegionExpectation want;
  want.kind = kind;
  want.failure_allowed = kind == RegionFrameKind::kSurvivors;
  want.value_type = kind == RegionFrameKind::kContribution ? value_type_ : ValueType::kFp32;
  want.sparse = sparse_layout_;
  want.region = j;
  want.begin = bounds_[j];
  want.length = bounds_[j + 1] - bounds_[j];
  // Survivor frames may also carry the band (global_selection.h).
  want.max_count =
      std::min(kind == RegionFrameKind::kContribution ? k_ : k_ + BandLimit(), want.length);
  want.implied_count = random_k_ ? first_entry_[j + 1] - first_entry_[j] : 0;
  return want;
}

// A band costs its entries' bytes at every rank, a histogram round about
// 2 x 512 bytes: stop once a band is about as cheap as another round.
uint64_t SparseAllreduce::BandLimit() const { return 256; }

uint64_t SparseAllreduce::Capacity(RegionFrameKind kind, int j) const {
  const RegionExpectation want = Expect(kind, j);
  return MaxRegionFrameBytes(want.sparse, want.value_type, want.length,
                             random_k_ ? want.implied_count : want.max_count) +
         auth_.trailer_bytes();
}

absl::Status SparseAllreduce::Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                    uint64_t n, bool nonfinite, ExchangeStats* cost) {
  const int p = group.size();
  auto plan = plans_.find(bucket);
  if (plan != plans_.end() && plan->second.size() == static_cast<size_t>(p) + 1 &&
      plan->second.back() == n) {
    bounds_ = plan->second;
  } else {
    EvenRegions(n, p, &bounds_);
  }
  const uint64_t fields[kAgreedFields] = {
      spec_fingerprint_,
      n,
      step,
      bucket,
      XXH3_64bits(bounds_.data(), bounds_.size() * sizeof(uint64_t)),
      nonfinite ? 1u : 0u};
  uint32_t unequal = 0;
  GRADWIRE_RETURN_IF_ERROR(AgreeOnFields(group, fields, &agreed_, &unequal, cost));
  const bool same = (unequal & ((1u << kPlanField) - 1)) == 0;
  const bool same_plan = (unequal & (1u << kPlanField)) == 0;
  // Some rank's flag differs from mine, or mine is set: some rank has one.
  nonfinite_ = nonfinite || (unequal & (1u << kNonFiniteField)) != 0;
  if (!same) {
    // Every rank saw it: gather the descriptors once more to name ranks.
    GRADWIRE_RETURN_IF_ERROR(naming_.Agree(group, bucket, step, n, cost));
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in sparse allreduce (bucket ", bucket, ", step ", step,
                     "): ranks disagree on spec, length, step or bucket"));
  }
  if (!same_plan) EvenRegions(n, p, &bounds_);  // plans differ: even regions
  first_entry_.resize(p + 1);
  for (int j = 0; j <= p; ++j) {
    first_entry_[j] =
        std::lower_bound(my_indices_.begin(), my_indices_.end(), bounds_[j]) - my_indices_.begin();
  }
  return absl::OkStatus();
}

absl::Status SparseAllreduce::ScatterContributions(transport::GlooGroup& group, uint32_t bucket,
                                                   uint64_t step, ExchangeStats* cost) {
  const int p = group.size();
  const uint64_t width = ValueBytes(value_type_);
  const uint32_t me = group.world_ranks()[group.rank()];
  absl::Time t0 = absl::Now();
  relative_.resize(k_);
  for (int j = 0; j < p; ++j) {
    for (uint64_t e = first_entry_[j]; e < first_entry_[j + 1]; ++e) {
      relative_[e] = static_cast<uint32_t>(my_indices_[e] - bounds_[j]);
    }
  }
  caps_.resize(p);
  uint64_t total = 0;
  for (int j = 0; j < p; ++j) total += caps_[j] = Capacity(RegionFrameKind::kContribution, j);
  send_.resize(total);
  blocks_.resize(p);
  received_.resize(p);
  uint64_t at = 0;
  for (int j = 0; j < p; ++j) {
    RegionFrameHeader h;
    h.kind = RegionFrameKind::kContribution;
    h.value_type = value_type_;
    h.region = j;
    h.begin = bounds_[j];
    h.length = bounds_[j + 1] - bounds_[j];
    const uint64_t first = first_entry_[j];
    const RegionEntries entries{relative_.data() + first, my_values_.data() + first * width,
                                first_entry_[j + 1] - first};
    uint8_t* frame = send_.data() + at;
    absl::StatusOr<size_t> written = WriteRegionFrame(
        h, sparse_layout_, entries, absl::MakeSpan(frame, caps_[j] - auth_.trailer_bytes()));
    if (!written.ok()) return written.status();
    if (frame[7] == static_cast<uint8_t>(RegionLayout::kDense)) ++last_.dense_frames_sent;
    const absl::Time t1 = absl::Now();
    cost->compress_time += t1 - t0;
    absl::StatusOr<size_t> signed_bytes =
        auth_.Sign(absl::MakeSpan(frame, caps_[j]), *written, FrameOrigin{me, step, bucket});
    t0 = absl::Now();
    cost->auth_time += t0 - t1;
    if (!signed_bytes.ok()) return signed_bytes.status();
    if (j == options_.corrupt_contribution_to_for_test && runs_ <= options_.corrupt_runs_for_test) {
      frame[kRegionHeaderBytes / 2] ^= 1;
    }
    blocks_[j] = absl::MakeConstSpan(frame, *signed_bytes);
    at += caps_[j];
  }
  absl::Status s = SparseCollectives::AlltoallvBounded(group, blocks_, caps_, &scratch_,
                                                       absl::MakeSpan(received_));
  cost->AddCall(group.last_call());
  return s;
}

absl::Status SparseAllreduce::ReduceRegion(const transport::GlooGroup& group, uint32_t bucket,
                                           uint64_t step, ExchangeStats* cost) {
  const int p = group.size();
  const int me = group.rank();
  const uint64_t begin = bounds_[me];
  const uint64_t length = bounds_[me + 1] - begin;
  const uint64_t words = (length + 63) / 64;
  const kernels::ValueFormat format = Format(value_type_);
  const RegionExpectation want = Expect(RegionFrameKind::kContribution, me);
  candidates_.clear();
  candidate_sums_.clear();
  keys_.clear();
  if (sums_dirty_ || sum_.size() < length || touched_.size() < words) {
    sum_.assign(std::max<size_t>(sum_.size(), length), 0.0f);
    touched_.assign(std::max<size_t>(touched_.size(), words), 0);
  }
  sums_dirty_ = true;  // until every contribution is in and read back out
  uint64_t* touched = touched_.data();
  auto touch = [touched](const uint32_t* indices, uint64_t count) {
    for (uint64_t e = 0; e < count; ++e) {
      touched[indices[e] >> 6] |= uint64_t{1} << (indices[e] & 63);
    }
  };
  for (int r = 0; r < p; ++r) {
    const int sender = group.world_ranks()[r];
    const absl::Time t0 = absl::Now();
    absl::StatusOr<absl::Span<const uint8_t>> frame =
        auth_.Verify(received_[r], FrameOrigin{static_cast<uint32_t>(sender), step, bucket});
    const absl::Time t1 = absl::Now();
    cost->auth_time += t1 - t0;
    if (!frame.ok()) return Rejected(frame.status(), "contribution", sender, bucket, step);
    absl::StatusOr<RegionFrameView> view = ParseRegionFrame(*frame, want, &frame_indices_);
    if (!view.ok()) return Rejected(view.status(), "contribution", sender, bucket, step);
    const uint8_t* values = view->values.data();
    absl::Status added;  // host buffers: the CPU reference, which cannot fail on checked input
    const uint32_t* indices = view->header.layout == RegionLayout::kImplied
                                  ? relative_.data() + first_entry_[me]
                                  : frame_indices_.data();
    switch (view->header.layout) {
      case RegionLayout::kDense:
        for (uint64_t i = 0; i < length; ++i) sum_[i] += kernels::LoadValue(values, i, format);
        std::fill(touched, touched + length / 64, ~uint64_t{0});
        if (length % 64 != 0) touched[length / 64] |= (uint64_t{1} << (length % 64)) - 1;
        break;
      default:
        added = kernels::SparseDecodeAccumulate(indices, values, view->header.count, format,
                                                sum_.data());
        touch(indices, view->header.count);
        break;
    }
    if (!added.ok()) return added;
    cost->compress_time += absl::Now() - t1;
  }
  // The candidates, ascending: every touched entry whose sum is not zero;
  // each word of touched_ is cleared as it is read.
  const absl::Time t2 = absl::Now();
  for (uint64_t w = 0; w < words; ++w) {
    uint64_t bits = touched[w];
    if (bits == 0) continue;
    touched[w] = 0;
    do {
      const uint64_t i = 64 * w + static_cast<uint64_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      const float sum = sum_[i];
      sum_[i] = 0.0f;
      if (IsZero(sum)) continue;
      candidates_.push_back(static_cast<uint32_t>(i));
      candidate_sums_.push_back(sum);
      keys_.push_back(SelectionKey(sum, begin + i));
    } while (bits != 0);
  }
  sums_dirty_ = false;
  cost->compress_time += absl::Now() - t2;
  return absl::OkStatus();
}

void SparseAllreduce::PlanNext(uint32_t bucket, uint64_t n, int p) {
  const uint64_t s = survivor_indices_.size();
  if (!options_.balance_regions || s == 0) {
    plans_.erase(bucket);
    return;
  }
  std::vector<uint64_t>& next = plans_[bucket];
  next.resize(p + 1);
  next[0] = 0;
  next[p] = n;
  for (int j = 1; j < p; ++j) next[j] = survivor_indices_[j * s / p];
}

absl::Status SparseAllreduce::Run(transport::GlooGroup& group, ErrorFeedback& ef,
                                  absl::string_view key, uint32_t bucket, uint64_t step,
                                  absl::Span<const float> in, absl::Span<float> out, float divisor,
                                  ExchangeStats* stats) {
  GRADWIRE_RETURN_IF_ERROR(Prepare(ef, key, bucket, step, in, out, staged_, stats));
  return Complete(group, staged_, divisor, stats);
}

absl::Status SparseAllreduce::Prepare(ErrorFeedback& ef, absl::string_view key, uint32_t bucket,
                                      uint64_t step, absl::Span<const float> in,
                                      absl::Span<float> out, Staged& st, ExchangeStats* stats) {
  const uint64_t n = in.size();
  if (out.size() != n || n >= (uint64_t{1} << 32) || !Supports(codec_.spec())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse allreduce: ", n, " elements in, ", out.size(), " out, codec \"",
        codec_.spec().ToString(), "\" (needs equal lengths below 2^32 and a sparse codec)"));
  }
  ExchangeStats cost;
  auto finish = [&](absl::Status s) {
    if (stats != nullptr) stats->Add(cost);
    return s;
  };
  st.bucket = bucket;
  st.step = step;
  st.n = n;
  st.k = codec_.spec().SelectedCount(n);
  st.out = out;
  st.nonfinite = false;

  // 1. Encode, then read this rank's entries back from its frame.
  const absl::Time t0 = absl::Now();
  st.frame.resize(codec_.MaxEncodedBytes(n));
  absl::StatusOr<EncodeStats> encoded = ef.Encode(key, in, step, absl::MakeSpan(st.frame));
  if (!encoded.ok()) return finish(encoded.status());
  cost.nonfinite += encoded->nonfinite;
  st.nonfinite = encoded->nonfinite > 0;
  // Where Complete gives back what did not survive (empty: error feedback
  // off, nothing to give back).
  st.residual = ef.MutableHostResidual(key);
  if (codec_.spec().UsesErrorFeedback() && st.residual.size() != n) {
    return finish(absl::FailedPreconditionError(
        absl::StrCat("sparse allreduce of \"", key, "\": its residual is not in host memory")));
  }
  FrameLimits own;  // just encoded here: the checksum would re-read it
  own.integrity = FrameIntegrity::kVerifiedByCaller;
  absl::StatusOr<ParsedFrame> parsed =
      ParseFrame(absl::MakeConstSpan(st.frame.data(), encoded->frame_bytes), own);
  if (!parsed.ok()) return finish(parsed.status());
  st.values = parsed->sections.values;
  st.indices.resize(st.k);
  absl::Status s;
  if (random_k_) {
    uint64_t temp_bytes = 0;
    s = kernels::RandomKIndices(nullptr, &temp_bytes, codec_.spec().seed, step, n, st.k, nullptr);
    st.random_temp.resize(temp_bytes);
    if (s.ok()) {
      s = kernels::RandomKIndices(st.random_temp.data(), &temp_bytes, codec_.spec().seed, step, n,
                                  st.k, st.indices.data());
    }
  } else {
    s = DecodeIndices(codec_.spec().indices, parsed->sections.indices, n,
                      absl::MakeSpan(st.indices));
  }
  cost.compress_time += absl::Now() - t0;
  return finish(s);
}

absl::Status SparseAllreduce::Complete(transport::GlooGroup& group, Staged& st, float divisor,
                                       ExchangeStats* stats) {
  ExchangeStats cost;
  auto finish = [&](absl::Status s) {
    my_indices_.swap(st.indices);  // back to the bucket, capacity and all
    if (s.ok()) {
      cost.compressed_buckets = 1;
      cost.sparse_allreduce_buckets = 1;
      cost.elements = st.n;
    }
    if (stats != nullptr) stats->Add(cost);
    return s;
  };
  const int p = group.size();
  const uint32_t bucket = st.bucket;
  const uint64_t step = st.step;
  ++runs_;
  last_ = SparseAllreduceInfo();
  n_ = st.n;
  k_ = st.k;
  my_values_ = st.values;
  my_indices_.swap(st.indices);

  // 2-5. The collectives; an owner's complaint travels as its notice.
  absl::Status s = Agree(group, bucket, step, n_, st.nonfinite, &cost);
  if (s.ok()) s = ScatterContributions(group, bucket, step, &cost);
  if (!s.ok()) return finish(s);
  const absl::Status owner_status = ReduceRegion(group, bucket, step, &cost);
  s = Select(group, &cost);
  if (s.ok()) s = GatherSurvivors(group, bucket, step, owner_status, &cost);
  if (!s.ok()) return finish(s);
  last_.bounds = bounds_;

  // 6. Everything checked: the average, and what did not survive back
  // into the residual (both lists ascending): residual[i] = fl(residual[i]
  // + value), which holds acc again (ErrorFeedback::GiveBack's rule).
  const absl::Time t1 = absl::Now();
  const absl::Span<float> out = st.out;
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t c = 0; c < survivor_indices_.size(); ++c) {
    out[survivor_indices_[c]] = survivor_values_[c] / divisor;
  }
  if (!st.residual.empty()) {
    // Which of my entries survived: a bit per element, set from the
    // survivors, read in my entries' order, then cleared the same way. (A
    // merge of the two ascending lists branched on every entry, which at
    // 10 % density mispredicts about every other time.) Every entry's
    // residual is stored, unchanged where it survived.
    survived_.resize((n_ + 63) / 64);
    for (uint32_t i : survivor_indices_) survived_[i / 64] |= uint64_t{1} << (i % 64);
    const kernels::ValueFormat format = Format(value_type_);
    float* residual = st.residual.data();
    for (uint64_t e = 0; e < k_; ++e) {
      const uint32_t i = my_indices_[e];
      const float r = residual[i];
      const float back =
          kernels::ResidualAfter(r, -kernels::LoadValue(my_values_.data(), e, format));
      residual[i] = (survived_[i / 64] >> (i % 64) & 1) != 0 ? r : back;
    }
    for (uint32_t i : survivor_indices_) survived_[i / 64] = 0;
  }
  // A rank's non-finite input is non-finite on every rank, as in the
  // allgather's frames (codec.h's non-finite policy).
  if (nonfinite_) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  cost.compress_time += absl::Now() - t1;
  PlanNext(bucket, n_, p);
  return finish(absl::OkStatus());
}

}  // namespace gradwire
