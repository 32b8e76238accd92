#include "join.h"

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
namespace python {
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

std::string AgreedSettings(const CommunicatorOptions& options) {
  return absl::StrCat(
      "spec=", options.compression.ToString(), ";hierarchical=", options.hierarchical ? 1 : 0,
      ";dense_below_elements=", options.dense_below_elements,
      ";dense_one_dimensional=", options.dense_one_dimensional ? 1 : 0, ";dense_algorithm=",
      options.dense_algorithm == transport::AllreduceAlgorithm::kRing ? "ring" : "halving_doubling",
      ";exchange=", options.exchange ? ExchangeKindName(*options.exchange) : "auto", ";");
}

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
      " (every rank needs the same secret: secret=, secret_file=, $GRADWIRE_JOB_SECRET_FILE or "
      "$GRADWIRE_JOB_SECRET)"));
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

absl::StatusOr<std::unique_ptr<Communicator>> Join(
    std::shared_ptr<transport::RendezvousStore> store, const transport::RendezvousConfig& config,
    absl::string_view bind_address, absl::string_view settings, const JobSecret& secret,
    const CommunicatorOptions& options) {
  GRADWIRE_RETURN_IF_ERROR(options.compression.Validate());
  transport::GroupOptions group_options;
  group_options.bind_address = std::string(bind_address);
  group_options.timeout = config.timeout > absl::ZeroDuration()
                              ? config.timeout
                              : transport::RendezvousConfig::kDefaultTimeout;
  group_options.event_loop_nice = options.event_loop_nice;
  absl::StatusOr<std::unique_ptr<transport::GlooGroup>> world = transport::GlooGroup::Create(
      config.rank, config.world_size, store->Scoped("world"), group_options);
  if (!world.ok()) return world.status();
  absl::StatusOr<FrameAuthenticator> auth = FrameAuthenticator::Create(secret, config.job_id);
  if (!auth.ok()) return auth.status();
  GRADWIRE_RETURN_IF_ERROR(CheckSameSecret(**world, *auth));
  GRADWIRE_RETURN_IF_ERROR(
      CheckSameSettings(**world, absl::StrCat(AgreedSettings(options), settings)));
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(
      std::move(*world), config.node_id, config.local_world_size, std::move(*auth), options);
  if (!comm.ok()) return comm.status();
  if (options.hierarchical) GRADWIRE_RETURN_IF_ERROR((*comm)->Barrier());
  return comm;
}

}  // namespace python
}  // namespace gradwire
