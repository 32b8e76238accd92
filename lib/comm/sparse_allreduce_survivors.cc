// The sparse allreduce's steps 4 and 5 (sparse_allreduce.h): the global
// selection over the owners' candidates, the allgather of every region's
// survivors, and the band every rank settles alike.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/comm/global_selection.h"
#include "gradwire/lib/comm/sparse_allreduce.h"
#include "gradwire/lib/comm/sparse_allreduce_internal.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {

using sparse_allreduce_internal::IsZero;
using sparse_allreduce_internal::Rejected;
using transport::SparseCollectives;

absl::Status SparseAllreduce::Select(transport::GlooGroup& group, ExchangeStats* cost) {
  if (random_k_) {  // the candidates share the k seeded indices: all survive
    threshold_ = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<GlobalSelection> selection =
      SelectGlobalTopK(group, keys_, k_, BandLimit(), &counts_, cost);
  if (!selection.ok()) return selection.status();
  threshold_ = selection->threshold;
  band_end_ = selection->band_end;
  kept_ = selection->kept;
  last_.candidates = selection->candidates;
  last_.survivors = selection->survivors;
  last_.selection_rounds = selection->rounds;
  return absl::OkStatus();
}

absl::Status SparseAllreduce::GatherSurvivors(transport::GlooGroup& group, uint32_t bucket,
                                              uint64_t step, const absl::Status& owner_status,
                                              ExchangeStats* cost) {
  const int p = group.size();
  const int me = group.rank();
  const uint32_t my_world_rank = group.world_ranks()[me];
  absl::Time t0 = absl::Now();
  caps_.resize(p);
  uint64_t total_cap = 0, caps_sum = 0;
  for (int j = 0; j < p; ++j) {
    caps_sum += caps_[j] = Capacity(RegionFrameKind::kSurvivors, j);
    total_cap += kRegionHeaderBytes + auth_.trailer_bytes();
  }
  // At most k survivors in all: a tighter bound than the sum of caps.
  total_cap += random_k_
                   ? 4 * k_
                   : MaxIndexBytes(static_cast<IndexEncoding>(sparse_layout_), k_ + BandLimit()) +
                         4 * (k_ + BandLimit());
  total_cap = std::min(total_cap, caps_sum);
  send_.resize(caps_[me]);
  absl::StatusOr<size_t> written;
  if (!owner_status.ok()) {
    written = WriteRegionFailure(me, bounds_[me], bounds_[me + 1] - bounds_[me],
                                 static_cast<uint32_t>(owner_status.code()), absl::MakeSpan(send_));
  } else {
    // Implied layout: a value for every shared index (0: no survivor).
    const uint64_t most = random_k_ ? first_entry_[me + 1] - first_entry_[me] : candidates_.size();
    my_survivors_.resize(most);
    value_bytes_.resize(4 * most);
    uint64_t kept = 0;
    if (random_k_) {
      // Every shared index, its sum where it is a candidate (both lists
      // ascending), else 0.
      size_t c = 0;
      for (uint64_t e = first_entry_[me]; e < first_entry_[me + 1]; ++e) {
        const uint32_t i = relative_[e];
        while (c < candidates_.size() && candidates_[c] < i) ++c;
        my_survivors_[kept] = i;
        kernels::StoreValue(
            value_bytes_.data(), kept++,
            c < candidates_.size() && candidates_[c] == i ? candidate_sums_[c] : 0.0f,
            kernels::ValueFormat::kFp32);
      }
    } else {
      // Every candidate is written and the count advances by whether it
      // goes on: no branch on a comparison that is as often true as not.
      // (my_survivors_ and value_bytes_ hold every candidate.)
      const uint64_t* keys = keys_.data();
      const uint32_t* candidates = candidates_.data();
      const float* sums = candidate_sums_.data();
      uint32_t* survivors = my_survivors_.data();
      uint8_t* values = value_bytes_.data();
      const uint64_t threshold = threshold_;
      for (size_t c = 0; c < candidates_.size(); ++c) {
        survivors[kept] = candidates[c];
        kernels::StoreValue(values, kept, sums[c], kernels::ValueFormat::kFp32);
        kept += keys[c] >= threshold;
      }
    }
    my_survivors_.resize(kept);
    value_bytes_.resize(4 * kept);
    RegionFrameHeader h;
    h.kind = RegionFrameKind::kSurvivors;
    h.region = me;
    h.begin = bounds_[me];
    h.length = bounds_[me + 1] - bounds_[me];
    written = WriteRegionFrame(
        h, sparse_layout_,
        RegionEntries{my_survivors_.data(), value_bytes_.data(), my_survivors_.size()},
        absl::MakeSpan(send_.data(), caps_[me] - auth_.trailer_bytes()));
    if (written.ok() && send_[7] == static_cast<uint8_t>(RegionLayout::kDense)) {
      ++last_.dense_frames_sent;
    }
  }
  if (!written.ok()) return written.status();
  absl::Time t1 = absl::Now();
  cost->compress_time += t1 - t0;
  absl::StatusOr<size_t> signed_bytes =
      auth_.Sign(absl::MakeSpan(send_), *written, FrameOrigin{my_world_rank, step, bucket});
  cost->auth_time += absl::Now() - t1;
  if (!signed_bytes.ok()) return signed_bytes.status();
  absl::Status s =
      SparseCollectives::AllgathervBounded(group, absl::MakeConstSpan(send_.data(), *signed_bytes),
                                           caps_, total_cap, &scratch_, absl::MakeSpan(received_));
  cost->AddCall(group.last_call());
  GRADWIRE_RETURN_IF_ERROR(s);
  if (!owner_status.ok()) return owner_status;  // the precise reason, here

  // Verify and decode every region's survivors before anything changes.
  survivor_indices_.clear();
  survivor_values_.clear();
  absl::Status failed;  // the first owner's failure notice
  for (int j = 0; j < p; ++j) {
    const int owner = group.world_ranks()[j];
    t0 = absl::Now();
    absl::StatusOr<absl::Span<const uint8_t>> frame =
        auth_.Verify(received_[j], FrameOrigin{static_cast<uint32_t>(owner), step, bucket});
    t1 = absl::Now();
    cost->auth_time += t1 - t0;
    if (!frame.ok()) return Rejected(frame.status(), "survivors", owner, bucket, step);
    absl::StatusOr<RegionFrameView> view =
        ParseRegionFrame(*frame, Expect(RegionFrameKind::kSurvivors, j), &frame_indices_);
    if (!view.ok()) return Rejected(view.status(), "survivors", owner, bucket, step);
    const RegionFrameHeader& h = view->header;
    if (h.kind == RegionFrameKind::kFailure) {
      if (failed.ok()) {
        failed = absl::Status(
            static_cast<absl::StatusCode>(h.status),
            absl::StrCat("rank ", owner, ", owner of region ", j, ", rejected a contribution ",
                         "(bucket ", bucket, ", step ", step, "; ",
                         absl::StatusCodeToString(static_cast<absl::StatusCode>(h.status)),
                         "; see its log): every rank discards the result"));
      }
      continue;
    }
    const uint8_t* values = view->values.data();
    for (uint64_t c = 0; c < h.count; ++c) {
      const float v = kernels::LoadValue(values, c, kernels::ValueFormat::kFp32);
      uint64_t index;
      if (h.layout == RegionLayout::kDense) {
        index = h.begin + c;
      } else if (h.layout == RegionLayout::kImplied) {
        index = my_indices_[first_entry_[j] + c];
      } else {
        index = h.begin + frame_indices_[c];
        if (IsZero(v)) {
          return Rejected(absl::InvalidArgumentError("a sparse survivor with a zero sum"),
                          "survivors", owner, bucket, step);
        }
      }
      if (IsZero(v)) continue;
      survivor_indices_.push_back(static_cast<uint32_t>(index));
      survivor_values_.push_back(v);
    }
    cost->compress_time += absl::Now() - t1;
  }
  if (!failed.ok()) return failed;
  if (random_k_) {
    last_.candidates = last_.survivors = survivor_indices_.size();
    return absl::OkStatus();
  }
  if (survivor_indices_.size() != kept_) {
    return absl::DataLossError(absl::StrCat("sparse allreduce (bucket ", bucket, ", step ", step,
                                            "): the regions sent ", survivor_indices_.size(),
                                            " entries, the global selection kept ", kept_));
  }
  // A band is left: every rank holds the same entries and picks the same
  // best of them.
  if (kept_ > last_.survivors) return SettleBand(bucket, step, cost);
  return absl::OkStatus();
}

absl::Status SparseAllreduce::SettleBand(uint32_t bucket, uint64_t step, ExchangeStats* cost) {
  const absl::Time t2 = absl::Now();
  keys_.resize(kept_);
  band_keys_.clear();
  uint64_t above = 0;
  for (uint64_t c = 0; c < kept_; ++c) {
    const uint64_t key = SelectionKey(survivor_values_[c], survivor_indices_[c]);
    keys_[c] = key;
    if (key >= band_end_) {
      ++above;
    } else {
      band_keys_.push_back(key);
    }
  }
  if (above > last_.survivors) {
    return absl::DataLossError(absl::StrCat("sparse allreduce (bucket ", bucket, ", step ", step,
                                            "): ", above, " entries above the band, ",
                                            last_.survivors, " survivors"));
  }
  // kNoKey when none of the band is wanted: then only those above it.
  const uint64_t cut =
      std::min(band_end_, SelectTopKLocally(band_keys_, last_.survivors - above).threshold);
  size_t out = 0;
  for (uint64_t c = 0; c < kept_; ++c) {
    if (keys_[c] < cut) continue;
    survivor_indices_[out] = survivor_indices_[c];
    survivor_values_[out++] = survivor_values_[c];
  }
  survivor_indices_.resize(out);
  survivor_values_.resize(out);
  cost->compress_time += absl::Now() - t2;
  return absl::OkStatus();
}

}  // namespace gradwire
