#include "gradwire/lib/comm/sparse_allgather.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gradwire/base/ensure_size.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace {

// "ranks 0, 2 have 1000; rank 1 has 999" for a field whose values differ,
// empty when every rank agrees. Groups ranks by value so that a single
// odd rank out is obvious in an 8-rank job. Only runs on the error path.
template <typename Get>
std::string Disagreement(const transport::GlooGroup& group, size_t count, Get get) {
  std::map<uint64_t, std::vector<int>> by_value;
  for (size_t r = 0; r < count; ++r) by_value[get(r)].push_back(group.world_ranks()[r]);
  if (by_value.size() <= 1) return "";
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : by_value) {
    parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "),
                                 ranks.size() == 1 ? " has " : " have ", value));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

uint64_t SpecFingerprint(const CompressionSpec& spec) {
  // QSGD senders round with per-rank seeds (CompressionSpec::ForSender);
  // the seed is not part of what ranks must agree on.
  CompressionSpec agreed = spec;
  if (agreed.method == Method::kQsgd) agreed.seed = 0;
  const std::string s = agreed.ToString();
  return XXH3_64bits(s.data(), s.size());
}

SparseAllgather::SparseAllgather(const Codec& codec, const FrameSigner& auth)
    : codec_(codec),
      // The default spec is "none" (fp32), always valid.
      dense_codec_(*MakeCodec(CompressionSpec())),
      auth_(auth),
      spec_fingerprint_(SpecFingerprint(codec.spec())) {}

size_t SparseAllgather::DenseSectionBytes(uint64_t n) const {
  return n == 0 ? 0 : dense_codec_->MaxEncodedBytes(n);  // fp32 frames have exactly this size
}

absl::Status SparseAllgather::CheckTable(const transport::GlooGroup& group,
                                         absl::Span<const Descriptor> table, const Descriptor& mine,
                                         bool check_frames) const {
  const size_t p = group.size();
  // The common case (everything agrees) compares integers only; messages
  // are built, and memory allocated, only on the error path.
  auto where = [&mine] {
    return absl::StrCat("collective mismatch in compressed allreduce (bucket ", mine.bucket,
                        ", step ", mine.step, ")");
  };
  struct Field {
    const char* name;
    uint64_t Descriptor::*member;
  };
  // Order matters only for which mismatch is reported first; a spec
  // difference explains a length difference, so it comes first.
  static constexpr Field kFields[] = {{"compression spec fingerprint", &Descriptor::spec},
                                      {"gradient length", &Descriptor::n},
                                      {"bucket", &Descriptor::bucket},
                                      {"step", &Descriptor::step},
                                      {"dense section length", &Descriptor::dense_n}};
  for (const Field& f : kFields) {
    bool same = true;
    for (size_t r = 1; r < p; ++r) same = same && table[r].*(f.member) == table[0].*(f.member);
    if (same) continue;
    std::string d = Disagreement(group, p, [&](size_t r) { return table[r].*(f.member); });
    std::string hint;
    if (f.member == &Descriptor::spec) {
      hint = absl::StrCat(" (this rank uses \"", codec_.spec().ToString(), "\")");
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": ", f.name, " differs across ranks: ", d, hint));
  }
  if (!check_frames) return absl::OkStatus();
  // Same spec and length everywhere: every frame must fit what the codec
  // can produce for n, plus the MAC trailer. Checked before the
  // allgatherv posts receives of these sizes.
  const uint64_t dense_bytes = DenseSectionBytes(mine.dense_n);
  const uint64_t max_bytes = codec_.MaxEncodedBytes(mine.n) + dense_bytes + auth_.trailer_bytes();
  const uint64_t min_bytes =
      kFrameHeaderBytes + kFrameChecksumBytes + dense_bytes + auth_.trailer_bytes();
  for (size_t r = 0; r < p; ++r) {
    const uint64_t b = table[r].frame_bytes;
    if (b > max_bytes || b < min_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": rank ", group.world_ranks()[r], " announced a ", b,
                       "-byte frame for ", mine.n, " elements, outside [", min_bytes, ", ",
                       max_bytes, "] that spec \"", codec_.spec().ToString(), "\" can produce"));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseAllgather::Agree(transport::GlooGroup& group, uint32_t bucket, uint64_t step,
                                    uint64_t n, ExchangeStats* stats) {
  const size_t p = group.size();
  const Descriptor mine{0, n, step, bucket, spec_fingerprint_, 0};
  EnsureSize(&agree_, p);
  absl::Status s = group.Allgather(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&mine), kDescriptorBytes),
      absl::MakeSpan(reinterpret_cast<uint8_t*>(agree_.data()), p * kDescriptorBytes));
  if (stats != nullptr) {
    stats->AddCall(group.last_call());
  }
  GRADWIRE_RETURN_IF_ERROR(s);
  return CheckTable(group, absl::MakeConstSpan(agree_.data(), p), mine, /*check_frames=*/false);
}

absl::Status SparseAllgather::Run(transport::GlooGroup& group, ErrorFeedback& ef,
                                  absl::string_view key, uint32_t bucket, uint64_t step,
                                  absl::Span<const float> in, absl::Span<float> out,
                                  absl::Span<const float> dense_in, absl::Span<float> dense_out,
                                  float divisor, ExchangeStats* stats, const DeviceCall* device) {
  if (in.size() != out.size() || dense_in.size() != dense_out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed allreduce: input has ", in.size(), " + ", dense_in.size(),
                     " dense elements, output ", out.size(), " + ", dense_out.size()));
  }
  GRADWIRE_RETURN_IF_ERROR(Encode(group, ef, key, bucket, step, in, dense_in, run_, stats, device));
  GRADWIRE_RETURN_IF_ERROR(Transfer(group, run_, stats));
  return Finish(group, run_, out, dense_out, divisor, stats, device);
}

absl::Status SparseAllgather::Encode(const transport::GlooGroup& group, ErrorFeedback& ef,
                                     absl::string_view key, uint32_t bucket, uint64_t step,
                                     absl::Span<const float> in, absl::Span<const float> dense_in,
                                     InFlight& f, ExchangeStats* stats, const DeviceCall* device) {
  if (device != nullptr && !dense_in.empty()) {
    return absl::InvalidArgumentError("compressed allreduce: no dense section on the device");
  }
  // 1-2. Encode with error feedback (then the dense section), then sign.
  ExchangeStats cost;
  const uint64_t n = in.size();
  f.bucket_ = bucket;
  f.step_ = step;
  f.n_ = n;
  f.dense_n_ = dense_in.size();
  f.frame_bytes_ = 0;
  const size_t dense_bytes = DenseSectionBytes(f.dense_n_);
  const size_t cap = codec_.MaxEncodedBytes(n) + dense_bytes + auth_.trailer_bytes();
  // The frame goes after room for the block prefix (Transfer's bounded
  // gather sends prefix and frame as one block, without a copy).
  EnsureSize(&f.send_, kBlockPrefixBytes + cap);
  uint8_t* const frame = f.send_.data() + kBlockPrefixBytes;
  const absl::Time t0 = absl::Now();
  absl::StatusOr<EncodeStats> encoded =
      ef.Encode(key, in, step, absl::MakeSpan(frame, cap - dense_bytes), device);
  absl::Status s = encoded.status();
  size_t payload = s.ok() ? encoded->frame_bytes : 0;
  if (s.ok()) cost.nonfinite += encoded->nonfinite;
  if (s.ok() && dense_bytes > 0) {
    absl::StatusOr<EncodeStats> dense = dense_codec_->Encode(
        dense_in, step, {}, absl::MakeSpan(frame + payload, dense_bytes));
    s = dense.status();
    if (s.ok()) payload += dense->frame_bytes;
  }
  const absl::Time t1 = absl::Now();
  cost.compress_time += t1 - t0;
  if (s.ok()) {
    const uint32_t my_world_rank = group.world_ranks()[group.rank()];
    absl::StatusOr<size_t> signed_bytes = auth_.Sign(absl::MakeSpan(frame, cap), payload,
                                                     FrameOrigin{my_world_rank, step, bucket});
    cost.auth_time += absl::Now() - t1;
    s = signed_bytes.status();
    if (s.ok()) f.frame_bytes_ = *signed_bytes;
  }
  if (stats != nullptr) stats->Add(cost);
  return s;
}

uint64_t SparseAllgather::BlockCapacity(uint64_t n, uint64_t dense_n) const {
  return kBlockPrefixBytes + codec_.MaxEncodedBytes(n) + DenseSectionBytes(dense_n) +
         auth_.trailer_bytes();
}

absl::Status SparseAllgather::Transfer(transport::GlooGroup& group, InFlight& f,
                                       ExchangeStats* stats) {
  const size_t p = group.size();
  ExchangeStats cost;
  auto add_wire = [&cost, &group]() { cost.AddCall(group.last_call()); };
  auto finish = [&](absl::Status s) {
    if (!s.ok()) agreed_.clear();  // the caller poisons itself; start over anyway
    if (stats != nullptr) stats->Add(cost);
    return s;
  };
  const Descriptor mine{f.frame_bytes_, f.n_, f.step_, f.bucket_, spec_fingerprint_, f.dense_n_};
  EnsureSize(&f.table_, p);
  EnsureSize(&f.sizes_, p);
  EnsureSize(&f.offsets_, p);

  const auto agreed = agreed_.find(f.bucket_);
  if (agreed != agreed_.end()) {
    // 3-4 in one round: every rank agreed on this bucket's shape before,
    // hence on the capacity of a block (prefix + the largest frame the
    // codec can make for that shape), and sends its descriptor and frame
    // as one bounded block. Every rank receives the same blocks, so the
    // table is checked identically everywhere, as after a descriptor
    // round, only once the frames are in. A rank whose bucket no longer
    // has the agreed shape sends its descriptor alone (its frame might not
    // fit a peer's receive): the table then tells every rank the same.
    const uint64_t cap = BlockCapacity(agreed->second.n, agreed->second.dense_n);
    const bool fits = agreed->second.n == f.n_ && agreed->second.dense_n == f.dense_n_;
    std::memcpy(f.send_.data() + transport::kBoundedHeaderBytes, &mine, kDescriptorBytes);
    EnsureSize(&f.recv_, p * cap);
    absl::Status s = group.AllgathervBounded(
        absl::MakeSpan(f.send_.data(), kBlockPrefixBytes + (fits ? f.frame_bytes_ : 0)), cap,
        absl::MakeSpan(f.recv_.data(), p * cap), absl::MakeSpan(f.sizes_.data(), p));
    add_wire();
    if (!s.ok()) return finish(s);
    for (size_t r = 0; r < p; ++r) {
      if (f.sizes_[r] < kBlockPrefixBytes) {
        return finish(absl::DataLossError(
            absl::StrCat("compressed allreduce (bucket ", f.bucket_, ", step ", f.step_,
                         "): rank ", group.world_ranks()[r], " sent a ", f.sizes_[r],
                         "-byte block, too short for its descriptor")));
      }
      std::memcpy(&f.table_[r], f.recv_.data() + r * cap + transport::kBoundedHeaderBytes,
                  kDescriptorBytes);
    }
    s = CheckTable(group, absl::MakeConstSpan(f.table_.data(), p), mine, /*check_frames=*/true);
    if (!s.ok()) return finish(s);
    // The table agrees, so every rank had the same shape, and so the same
    // `fits`: frames came with every descriptor or with none.
    for (size_t r = 0; r < p; ++r) {
      const uint64_t want = kBlockPrefixBytes + (fits ? f.table_[r].frame_bytes : 0);
      if (f.sizes_[r] != want) {
        return finish(absl::DataLossError(absl::StrCat(
            "compressed allreduce (bucket ", f.bucket_, ", step ", f.step_, "): rank ",
            group.world_ranks()[r], " sent a ", f.sizes_[r], "-byte block, its descriptor says ",
            want)));
      }
      f.offsets_[r] = r * cap + kBlockPrefixBytes;
      f.sizes_[r] = f.table_[r].frame_bytes;
    }
    if (fits) return finish(absl::OkStatus());
    // Every rank's bucket changed shape alike: the frames follow by the
    // table, as on a bucket's first exchange.
  } else {
    // 3. Descriptors: sizes plus everything that must agree. The table
    // rides in GlooGroup's agreement round (an Allgather this small needs
    // no round of its own), so a bucket's first Transfer costs two rounds
    // of P-1 messages.
    static_assert(kDescriptorBytes <= transport::GlooGroup::kInlineAllgatherBytes,
                  "the descriptor must fit in the agreement round");
    absl::Status s = group.Allgather(
        absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&mine), kDescriptorBytes),
        absl::MakeSpan(reinterpret_cast<uint8_t*>(f.table_.data()), p * kDescriptorBytes));
    add_wire();
    if (!s.ok()) return finish(s);
    s = CheckTable(group, absl::MakeConstSpan(f.table_.data(), p), mine, /*check_frames=*/true);
    if (!s.ok()) return finish(s);
  }

  // 4. The frames, in rank order.
  uint64_t total = 0;
  for (size_t r = 0; r < p; ++r) {
    f.sizes_[r] = f.table_[r].frame_bytes;
    f.offsets_[r] = total;
    total += f.sizes_[r];
  }
  EnsureSize(&f.recv_, total);
  // The table was gathered and checked identically on every rank just
  // now: no second agreement round.
  absl::Status s = group.AllgathervOfGatheredTable(
      absl::MakeConstSpan(f.send_.data() + kBlockPrefixBytes, f.frame_bytes_),
      absl::MakeConstSpan(f.sizes_.data(), p), absl::MakeSpan(f.recv_.data(), total));
  add_wire();
  if (s.ok()) agreed_[f.bucket_] = Shape{f.n_, f.dense_n_};
  return finish(s);
}

absl::Status SparseAllgather::Finish(const transport::GlooGroup& group, InFlight& f,
                                     absl::Span<float> out, absl::Span<float> dense_out,
                                     float divisor, ExchangeStats* stats,
                                     const DeviceCall* device) {
  const size_t p = group.size();
  const uint64_t n = f.n_;
  const uint64_t dense_n = f.dense_n_;
  const uint32_t bucket = f.bucket_;
  const uint64_t step = f.step_;
  if (out.size() != n || dense_out.size() != dense_n) {
    return absl::InvalidArgumentError(absl::StrCat("compressed allreduce: input had ", n, " + ",
                                                   dense_n, " dense elements, output has ",
                                                   out.size(), " + ", dense_out.size()));
  }
  const size_t dense_bytes = DenseSectionBytes(dense_n);
  ExchangeStats cost;
  auto finish = [&](absl::Status s) {
    if (stats != nullptr) stats->Add(cost);
    return s;
  };

  // 5. Authenticate every frame before any of them is decoded.
  absl::Time t0 = absl::Now();
  EnsureSize(&frames_, p);
  EnsureSize(&dense_frames_, p);
  for (size_t r = 0; r < p; ++r) {
    const int sender = group.world_ranks()[r];
    absl::StatusOr<absl::Span<const uint8_t>> frame =
        auth_.Verify(absl::MakeConstSpan(f.recv_.data() + f.offsets_[r], f.sizes_[r]),
                     FrameOrigin{static_cast<uint32_t>(sender), step, bucket});
    if (!frame.ok()) {
      cost.auth_time += absl::Now() - t0;
      return finish(
          absl::Status(frame.status().code(),
                       absl::StrCat("frame from rank ", sender, " (bucket ", bucket, ", step ",
                                    step, ") rejected: ", frame.status().message())));
    }
    // The dense section is the payload's tail. CheckTable bounded the
    // length from below, but a frame is only trusted as far as it is
    // checked.
    if (frame->size() < dense_bytes + kFrameHeaderBytes + kFrameChecksumBytes) {
      cost.auth_time += absl::Now() - t0;
      return finish(absl::DataLossError(absl::StrCat(
          "frame from rank ", sender, " (bucket ", bucket, ", step ", step, ") holds ",
          frame->size(), " bytes, too few for a ", dense_n, "-element dense section")));
    }
    frames_[r] = frame->first(frame->size() - dense_bytes);
    dense_frames_[r] = frame->last(dense_bytes);
  }
  const absl::Time t1 = absl::Now();
  cost.auth_time += t1 - t0;

  // 6. Decode in rank order into zeros, then average. DecodeAverage
  // validates every frame before it writes its output (all but the
  // checksum, which would repeat step 5's MACs with a pass of its own
  // over every frame: FrameIntegrity::kVerifiedByCaller); the dense
  // section goes to scratch first, so a bad frame in either section
  // leaves both outputs unchanged.
  auto decoded = [&](const absl::Status& s, size_t bad, const char* what) {
    cost.compress_time += absl::Now() - t1;
    if (bad >= p) return finish(s);
    return finish(absl::Status(
        s.code(), absl::StrCat(what, " from rank ", group.world_ranks()[bad], " (bucket ", bucket,
                               ", step ", step, ") could not be decoded: ", s.message())));
  };
  size_t bad = 0;
  absl::Status s;
  if (dense_n > 0) {
    EnsureSize(&dense_sum_, dense_n);
    s = dense_codec_->DecodeAverage(absl::MakeConstSpan(dense_frames_.data(), p), divisor,
                                    absl::MakeSpan(dense_sum_.data(), dense_n), &decode_scratch_,
                                    &bad, nullptr, FrameIntegrity::kVerifiedByCaller);
    if (!s.ok()) return decoded(s, bad, "dense section");
  }
  s = codec_.DecodeAverage(absl::MakeConstSpan(frames_.data(), p), divisor, out, &decode_scratch_,
                           &bad, device, FrameIntegrity::kVerifiedByCaller);
  if (!s.ok()) return decoded(s, bad, "frame");
  std::copy(dense_sum_.begin(), dense_sum_.begin() + dense_n, dense_out.begin());
  cost.compress_time += absl::Now() - t1;
  cost.compressed_buckets = 1;
  cost.elements = n + dense_n;
  return finish(absl::OkStatus());
}

}  // namespace gradwire
