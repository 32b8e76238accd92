#include "gradwire/lib/comm/global_selection.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kMaxRounds = 64 / kDigitBits;
// Nothing reaches it: the top key bit is always 0 (MagnitudeKey < 2^31).
constexpr uint64_t kNoKey = ~uint64_t{0};

}  // namespace

absl::StatusOr<GlobalSelection> SelectGlobalTopK(transport::GlooGroup& group,
                                                 absl::Span<const uint64_t> keys, uint64_t k,
                                                 std::vector<uint32_t>* counts,
                                                 ExchangeStats* stats) {
  GlobalSelection result;
  if (k == 0) {
    result.threshold = kNoKey;
    return result;
  }
  counts->resize(kBins);
  uint64_t prefix = 0;  // the key bits fixed so far
  uint64_t wanted = k;  // survivors still to find among keys with that prefix
  for (int round = 0; round < kMaxRounds; ++round) {
    const int shift = 64 - kDigitBits * (round + 1);
    std::fill(counts->begin(), counts->end(), 0);
    uint32_t* bins = counts->data();
    if (round == 0) {
      for (uint64_t key : keys) ++bins[key >> shift];
    } else {
      for (uint64_t key : keys) {
        if ((key >> (shift + kDigitBits)) == prefix) ++bins[(key >> shift) & (kBins - 1)];
      }
    }
    absl::Status s = transport::SparseCollectives::AllreduceU32(group, absl::MakeSpan(*counts),
                                                                transport::ReduceOp::kSum);
    if (stats != nullptr) stats->AddCall(group.last_call());
    if (!s.ok()) return s;
    ++result.rounds;
    if (round == 0) {
      for (int b = 0; b < kBins; ++b) result.candidates += bins[b];
      if (result.candidates <= k) {
        result.survivors = result.candidates;  // all of them: threshold 0
        return result;
      }
    }
    // The bin holding the wanted-th largest key, counting from the top;
    // every key in a higher bin survives.
    uint64_t above = 0;
    int bin = kBins - 1;
    for (; bin > 0 && above + bins[bin] < wanted; --bin) above += bins[bin];
    wanted -= above;
    prefix = prefix << kDigitBits | static_cast<uint64_t>(bin);
    if (bins[bin] == wanted) {  // the whole bin survives
      result.threshold = prefix << shift;
      result.survivors = k;
      return result;
    }
  }
  // Distinct keys leave at most one key per bin in the last round.
  return absl::InternalError(absl::StrCat(
      "global top-", k, " selection did not converge: selection keys repeat across ranks"));
}

GlobalSelection SelectTopKLocally(absl::Span<const uint64_t> keys, uint64_t k) {
  GlobalSelection result;
  result.candidates = keys.size();
  if (k == 0) {
    result.threshold = kNoKey;
    return result;
  }
  if (keys.size() <= k) {
    result.survivors = keys.size();
    return result;
  }
  std::vector<uint64_t> sorted(keys.begin(), keys.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(),
                   std::greater<uint64_t>());
  result.threshold = sorted[k - 1];
  result.survivors = k;
  return result;
}

}  // namespace gradwire
