// GlooGroup's gathering collectives: AllgatherU64, ExpectSame, the
// Allgatherv family and Allgather.
#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gradwire/base/coding.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/bounded_block.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/gloo_status.h"
#include "gradwire/transport/ring_allgather.h"

namespace gradwire {
namespace transport {
namespace {

// Validates an allgatherv size table against what this rank holds; the
// reason is reported locally, the other ranks learn "invalid arguments".
absl::Status CheckLocalAllgatherv(int rank, int size, absl::Span<const uint8_t> mine,
                                  absl::Span<const uint64_t> sizes, size_t out_size) {
  if (sizes.size() != static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allgatherv: size table has ", sizes.size(), " entries for ", size, " ranks"));
  }
  if (sizes[rank] != mine.size()) {
    return absl::InvalidArgumentError(absl::StrCat("allgatherv: size table says rank ", rank,
                                                   " sends ", sizes[rank], " bytes but it has ",
                                                   mine.size()));
  }
  uint64_t total = 0;
  for (uint64_t s : sizes) {
    if (s > (uint64_t{1} << 62) || total + s < total) {
      return absl::InvalidArgumentError("allgatherv: size table overflows");
    }
    total += s;
  }
  if (total != out_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("allgatherv: output holds ", out_size, " bytes, sizes sum to ", total));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GlooGroup::AllgatherU64(uint64_t value, absl::Span<uint64_t> all) {
  return Run(kAllgatherU64, /*agreement_round=*/true, [&]() -> absl::Status {
    std::vector<CallDescriptor> descriptors;
    GRADWIRE_RETURN_IF_ERROR(Agree(CallDescriptor{kAllgatherU64, 1, 0, value}, &descriptors));
    GRADWIRE_RETURN_IF_ERROR(
        CheckSame(descriptors, world_ranks_, OpName(kAllgatherU64), /*value_is_flags=*/false));
    // Checked after the round, which the other ranks are waiting in.
    if (all.size() != static_cast<size_t>(size_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllgatherU64 output has ", all.size(), " slots for ", size_, " ranks"));
    }
    for (int i = 0; i < size_; ++i) all[i] = descriptors[i].value;
    return absl::OkStatus();
  });
}

absl::Status GlooGroup::ExpectSame(uint64_t value, absl::string_view what) {
  return Run(kExpectSame, /*agreement_round=*/true, [&]() -> absl::Status {
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(Agree(CallDescriptor{kExpectSame, 0, 0, value}, &all));
    GRADWIRE_RETURN_IF_ERROR(
        CheckSame(all, world_ranks_, OpName(kExpectSame), /*value_is_flags=*/false));
    std::map<uint64_t, std::vector<int>> groups;
    for (int i = 0; i < size_; ++i) groups[all[i].value].push_back(world_ranks_[i]);
    if (groups.size() == 1) return absl::OkStatus();
    std::vector<std::string> parts;
    for (const auto& [v, ranks] : groups) {
      parts.push_back(absl::StrCat(RanksVerb(ranks, "has", "have"), " 0x", absl::Hex(v)));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in ", what, ": ", absl::StrJoin(parts, "; ")));
  });
}

absl::Status GlooGroup::Allgatherv(absl::Span<const uint8_t> mine, absl::Span<const uint64_t> sizes,
                                   absl::Span<uint8_t> out) {
  return AllgathervImpl(mine, sizes, out, /*agree=*/true);
}

absl::Status GlooGroup::AllgathervOfGatheredTable(absl::Span<const uint8_t> mine,
                                                  absl::Span<const uint64_t> sizes,
                                                  absl::Span<uint8_t> out) {
  return AllgathervImpl(mine, sizes, out, /*agree=*/false);
}

absl::Status GlooGroup::AllgathervImpl(absl::Span<const uint8_t> mine,
                                       absl::Span<const uint64_t> sizes, absl::Span<uint8_t> out,
                                       bool agree) {
  return Run(kAllgatherv, /*agreement_round=*/agree, [&]() -> absl::Status {
    const absl::Status local = CheckLocalAllgatherv(rank_, size_, mine, sizes, out.size());
    if (agree) {
      std::vector<CallDescriptor> all;
      GRADWIRE_RETURN_IF_ERROR(Agree(
          CallDescriptor{kAllgatherv, mine.size(), HashTable(sizes), local.ok() ? 0 : kArgsBad},
          &all));
      GRADWIRE_RETURN_IF_ERROR(local);
      GRADWIRE_RETURN_IF_ERROR(
          CheckSame(all, world_ranks_, OpName(kAllgatherv), /*value_is_flags=*/true));
    } else if (!local.ok()) {
      // A caller bug (the table was not this rank's gathered one): the
      // peers are already posting receives, so the group cannot stay
      // consistent. Poison it; they fail within the timeout.
      return Fail(local);
    }

    // The size table is now known to be identical everywhere: check the
    // cap here, where every rank reaches the same verdict, and before Gloo
    // posts a receive (a receive smaller than the message kills the
    // process).
    std::vector<int> over;
    for (int i = 0; i < size_; ++i) {
      if (sizes[i] > options_.max_bytes_per_rank) over.push_back(world_ranks_[i]);
    }
    if (!over.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collective mismatch in allgatherv: ", NameRanks(over), " would exceed the cap of ",
          options_.max_bytes_per_rank, " bytes per rank"));
    }
    uint64_t total = 0;
    for (uint64_t s : sizes) total += s;
    if (size_ == 1) {
      if (!mine.empty()) std::memcpy(out.data(), mine.data(), mine.size());
      return absl::OkStatus();
    }
    if (total == 0) return absl::OkStatus();  // nothing moves anywhere
    if (UseDirectAllgatherv(sizes)) {
      // Our block to each of the P - 1 peers; every block but ours in.
      AddBytes(sizes[rank_] * (size_ - 1), total - sizes[rank_]);
      return DirectGather(mine.data(), sizes, out.data(), options_.receive_window,
                          "allgatherv (direct)");
    }
    // The ring forwards every block but the next rank's; receives all but
    // ours.
    AddBytes(total - sizes[(rank_ + 1) % size_], total - sizes[rank_]);
    return RingGather(mine.data(), sizes, out.data(), "allgatherv");
  });
}

absl::Status GlooGroup::AllgathervBounded(absl::Span<uint8_t> block, uint64_t capacity,
                                          absl::Span<uint8_t> out, absl::Span<uint64_t> lengths) {
  return Run(kAllgathervBounded, /*agreement_round=*/false, [&]() -> absl::Status {
    const uint64_t p = static_cast<uint64_t>(size_);
    if (capacity < kBoundedHeaderBytes || block.size() < kBoundedHeaderBytes ||
        block.size() > capacity || capacity > options_.max_bytes_per_rank ||
        capacity > (uint64_t{1} << 62) / p || out.size() != p * capacity || lengths.size() != p) {
      // A caller bug: the peers are already sending. Poison the group;
      // they fail within the timeout.
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "allgatherv_bounded: a ", block.size(), "-byte block under a capacity of ", capacity,
          " (cap ", options_.max_bytes_per_rank, "), ", out.size(), " output bytes for ", size_,
          " ranks, ", lengths.size(), " lengths")));
    }
    WriteBoundedHeader(block.data(), block.size());
    uint8_t* const mine = out.data() + rank_ * capacity;
    if (size_ == 1) {
      std::memcpy(mine, block.data(), block.size());
      lengths[0] = block.size();
      return absl::OkStatus();
    }
    // A message too short to hold a header, or a receive never written,
    // must not read as a block (a stale length from an earlier call):
    // every other rank's header is cleared before any receive is posted.
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) std::memset(out.data() + r * capacity, 0, kBoundedHeaderBytes);
    }
    const std::vector<uint64_t> capacities(size_, capacity);
    const bool direct = UseDirectAllgatherv(capacities);
    absl::Status s = direct ? DirectGatherBounded(block.data(), block.size(), capacities,
                                                  out.data(), "allgatherv_bounded (direct)")
                            : RingGatherBounded(block.data(), block.size(), capacities,
                                                out.data(), "allgatherv_bounded");
    if (!s.ok()) return s;
    uint64_t received = 0;
    for (int r = 0; r < size_; ++r) {
      lengths[r] =
          r == rank_ ? block.size() : BoundedBlockLength(out.data() + r * capacity, capacity);
      if (lengths[r] == 0) {
        return Fail(absl::DataLossError(absl::StrCat(
            "allgatherv_bounded: rank ", world_ranks_[r], "'s block announces ",
            DecodeFixed64(out.data() + r * capacity), " bytes, outside [", kBoundedHeaderBytes,
            ", ", capacity, "]")));
      }
      if (r != rank_) received += lengths[r];
    }
    if (direct) {
      AddBytes(block.size() * (p - 1), received);
    } else {
      // The ring forwards every block but the next rank's.
      AddBytes(received + block.size() - lengths[(rank_ + 1) % size_], received);
    }
    return absl::OkStatus();
  });
}

absl::Status GlooGroup::AllgathervBytes(absl::Span<const uint8_t> mine, uint64_t max_bytes_per_rank,
                                        std::vector<uint8_t>* out, std::vector<uint64_t>* sizes) {
  sizes->assign(size_, 0);
  GRADWIRE_RETURN_IF_ERROR(AllgatherU64(mine.size(), absl::MakeSpan(*sizes)));
  // Every rank holds the same table, so every rank reaches the same verdict.
  const uint64_t cap = std::min(max_bytes_per_rank, options_.max_bytes_per_rank);
  std::vector<int> over;
  std::vector<std::string> parts;
  for (int i = 0; i < size_; ++i) {
    if ((*sizes)[i] <= cap) continue;
    over.push_back(world_ranks_[i]);
    parts.push_back(absl::StrCat("rank ", world_ranks_[i], ": ", (*sizes)[i]));
  }
  if (!over.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective mismatch in allgatherv: ", RanksVerb(over, "exceeds", "exceed"),
                     " the cap of ", cap, " bytes per rank (", absl::StrJoin(parts, ", "), ")"));
  }
  uint64_t total = 0;
  for (uint64_t s : *sizes) total += s;
  out->resize(total);
  return Allgatherv(mine, *sizes, absl::MakeSpan(*out));
}

absl::Status GlooGroup::Allgather(absl::Span<const uint8_t> mine, absl::Span<uint8_t> out) {
  return Run(kAllgather, /*agreement_round=*/true, [&]() -> absl::Status {
    absl::Status local;
    if (out.size() != mine.size() * static_cast<size_t>(size_)) {
      local = absl::InvalidArgumentError(absl::StrCat("allgather: output holds ", out.size(),
                                                      " bytes, need ", size_, " x ", mine.size()));
    }
    // `shared` carries the length: differing lengths are a mismatch.
    CallDescriptor d{kAllgather, mine.size(), mine.size(), local.ok() ? 0 : kArgsBad};
    const bool inline_data = mine.size() <= kInlineAllgatherBytes;
    if (inline_data && !mine.empty()) std::memcpy(d.payload, mine.data(), mine.size());
    std::vector<CallDescriptor> all;
    GRADWIRE_RETURN_IF_ERROR(Agree(d, &all));
    GRADWIRE_RETURN_IF_ERROR(local);
    GRADWIRE_RETURN_IF_ERROR(CheckSameLength(all, world_ranks_, OpName(kAllgather), "bytes"));
    if (mine.empty()) return absl::OkStatus();
    if (size_ == 1) {
      std::memcpy(out.data(), mine.data(), mine.size());
      return absl::OkStatus();
    }
    if (inline_data) {
      // The data came with the agreement round.
      for (int i = 0; i < size_; ++i) {
        std::memcpy(out.data() + i * mine.size(), all[i].payload, mine.size());
      }
      return absl::OkStatus();
    }
    const std::vector<uint64_t> sizes(size_, mine.size());
    AddBytes(mine.size() * (size_ - 1), mine.size() * (size_ - 1));
    if (UseDirectAllgatherv(sizes)) {
      return DirectGather(mine.data(), sizes, out.data(), options_.receive_window,
                          "allgather (direct)");
    }
    return RingGather(mine.data(), sizes, out.data(), "allgather");
  });
}

}  // namespace transport
}  // namespace gradwire
