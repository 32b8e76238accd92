#include "gradwire/lib/comm/global_selection.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "gradwire/transport/sparse_collectives.h"

namespace gradwire {
namespace {

// The top key bit is always 0 (MagnitudeKey < 2^31): 63 bits in 9 digits.
constexpr int kDigitBits = 7;
constexpr int kBins = 1 << kDigitBits;
constexpr int kMaxRounds = 9;
// Nothing reaches it.
constexpr uint64_t kNoKey = ~uint64_t{0};

}  // namespace

absl::StatusOr<GlobalSelection> SelectGlobalTopK(transport::GlooGroup& group,
                                                 absl::Span<const uint64_t> keys, uint64_t k,
                                                 uint64_t band_limit, std::vector<uint32_t>* counts,
                                                 ExchangeStats* stats) {
  GlobalSelection result;
  if (k == 0) {
    result.threshold = kNoKey;
    return result;
  }
  counts->resize(kBins);
  uint64_t prefix = 0;  // the key bits fixed so far (bit 63 is 0)
  uint64_t wanted = k;  // survivors still to find among keys with that prefix
  uint64_t above = 0;   // keys known to survive (higher bins so far)
  for (int round = 0; round < kMaxRounds; ++round) {
    const int shift = 64 - 1 - kDigitBits * (round + 1);
    std::fill(counts->begin(), counts->end(), 0);
    uint32_t* bins = counts->data();
    // Every key adds whether it still ties on the prefix: no branch on a
    // test that, from the second round on, most keys fail unpredictably.
    for (uint64_t key : keys) {
      bins[(key >> shift) & (kBins - 1)] += (key >> (shift + kDigitBits)) == prefix;
    }
    absl::Status s = transport::SparseCollectives::AllreduceU32(group, absl::MakeSpan(*counts),
                                                                transport::ReduceOp::kSum);
    if (stats != nullptr) stats->AddCall(group.last_call());
    if (!s.ok()) return s;
    ++result.rounds;
    if (round == 0) {
      for (int b = 0; b < kBins; ++b) result.candidates += bins[b];
      if (result.candidates <= k) {  // all of them: threshold 0
        result.kept = result.survivors = result.candidates;
        return result;
      }
      result.survivors = k;
    }
    // The bin holding the wanted-th largest key, counting from the top;
    // every key in a higher bin survives.
    uint64_t higher = 0;
    int bin = kBins - 1;
    for (; bin > 0 && higher + bins[bin] < wanted; --bin) higher += bins[bin];
    wanted -= higher;
    above += higher;
    prefix = prefix << kDigitBits | static_cast<uint64_t>(bin);
    if (bins[bin] == wanted || bins[bin] <= band_limit) {
      // The whole bin goes on: exactly the survivors, or a band.
      result.threshold = prefix << shift;
      result.kept = above + bins[bin];
      // The bin's end (bit 63 is 0, so this does not wrap).
      result.band_end = result.kept > k ? (prefix + 1) << shift : result.threshold;
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
    result.kept = result.survivors = keys.size();
    return result;
  }
  std::vector<uint64_t> sorted(keys.begin(), keys.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(),
                   std::greater<uint64_t>());
  result.threshold = result.band_end = sorted[k - 1];
  result.kept = result.survivors = k;
  return result;
}

}  // namespace gradwire
