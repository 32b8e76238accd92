#include "gradwire/lib/comm/rendezvous_checks.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gradwire/base/status_macros.h"

namespace gradwire {
namespace {

// What every rank signs; its bytes do not matter, its origin does.
constexpr char kToken[] = "gradwire join: same secret?";
constexpr size_t kTokenBytes = sizeof(kToken) - 1;
// Settings longer than this are a caller bug, not something to gather.
constexpr uint64_t kMaxSettingsBytes = 16 << 10;

// "rank 3" / "ranks [0, 1]", as transport/'s mismatch messages name them.
std::string NameRanks(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  return absl::StrCat("ranks [", absl::StrJoin(ranks, ", "), "]");
}

// "key=value;..." -> ordered (key, value) pairs.
std::vector<std::pair<std::string, std::string>> SplitSettings(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace

absl::Status CheckSameSecret(transport::GlooGroup& world, const FrameAuthenticator& auth) {
  const int p = world.size();
  const size_t each = kTokenBytes + auth.trailer_bytes();
  std::vector<uint8_t> mine(each);
  std::copy(kToken, kToken + kTokenBytes, mine.begin());
  const FrameOrigin origin{static_cast<uint32_t>(world.rank()), 0, kJoinBucket};
  GRADWIRE_RETURN_IF_ERROR(auth.Sign(absl::MakeSpan(mine), kTokenBytes, origin).status());
  std::vector<uint8_t> all(each * p);
  GRADWIRE_RETURN_IF_ERROR(world.Allgather(mine, absl::MakeSpan(all)));
  // My class: the lowest rank whose token my secret verifies (my own
  // always does). Ranks with one secret share a class, so every rank
  // computes the same table from the gathered classes.
  uint64_t mine_class = world.rank();
  for (int r = 0; r < world.rank(); ++r) {
    const FrameOrigin theirs{static_cast<uint32_t>(r), 0, kJoinBucket};
    if (auth.Verify(absl::MakeConstSpan(all.data() + r * each, each), theirs).ok()) {
      mine_class = r;
      break;
    }
  }
  std::vector<uint64_t> classes(p);
  GRADWIRE_RETURN_IF_ERROR(world.AllgatherU64(mine_class, absl::MakeSpan(classes)));
  std::map<uint64_t, std::vector<int>> groups;
  for (int r = 0; r < p; ++r) groups[classes[r]].push_back(world.world_ranks()[r]);
  if (groups.size() == 1) return absl::OkStatus();
  std::vector<std::string> parts;
  for (const auto& [c, ranks] : groups) {
    parts.push_back(
        parts.empty()
            ? absl::StrCat(NameRanks(ranks), ranks.size() == 1 ? " holds" : " hold", " one secret")
            : absl::StrCat(NameRanks(ranks), " another"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "collective mismatch in job secret at rendezvous: ", absl::StrJoin(parts, ", "),
      " (every rank needs the same job secret: $GRADWIRE_JOB_SECRET_FILE, $GRADWIRE_JOB_SECRET, "
      "or the caller's secret / secret_file)"));
}

absl::Status CheckSameSettings(transport::GlooGroup& world, const std::string& settings) {
  if (settings.size() > kMaxSettingsBytes) {
    return absl::InvalidArgumentError(absl::StrCat("settings to agree on are ", settings.size(),
                                                   " bytes, at most ", kMaxSettingsBytes));
  }
  std::vector<uint8_t> gathered;
  std::vector<uint64_t> sizes;
  GRADWIRE_RETURN_IF_ERROR(world.AllgathervBytes(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(settings.data()), settings.size()),
      kMaxSettingsBytes, &gathered, &sizes));
  std::vector<std::vector<std::pair<std::string, std::string>>> per_rank;
  size_t offset = 0;
  for (uint64_t n : sizes) {
    per_rank.push_back(
        SplitSettings(std::string(reinterpret_cast<const char*>(gathered.data()) + offset, n)));
    offset += n;
  }
  // Every key any rank has, in the order ranks list them.
  std::vector<std::string> keys;
  for (const auto& rank_settings : per_rank) {
    for (const auto& [k, v] : rank_settings) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  std::vector<std::string> differing;
  for (const std::string& key : keys) {
    std::map<std::string, std::vector<int>> groups;  // value -> ranks
    for (size_t r = 0; r < per_rank.size(); ++r) {
      // Every value the rank gives the key, in order: a key given twice
      // ("settings" repeating one of the library's) must not hide a
      // difference behind its last value.
      std::string value;
      bool found = false;
      for (const auto& [k, v] : per_rank[r]) {
        if (k != key) continue;
        value = found ? absl::StrCat(value, " then ", v) : v;
        found = true;
      }
      if (!found) value = "(unset)";
      groups[value].push_back(world.world_ranks()[r]);
    }
    if (groups.size() == 1) continue;
    std::vector<std::string> parts;
    for (const auto& [value, ranks] : groups) {
      parts.push_back(absl::StrCat(NameRanks(ranks), " ", key, "=", value));
    }
    differing.push_back(absl::StrJoin(parts, " vs "));
  }
  if (differing.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("collective mismatch in settings at rendezvous: ",
                                                 absl::StrJoin(differing, "; ")));
}

}  // namespace gradwire
