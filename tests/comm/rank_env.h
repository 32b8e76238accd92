// What the region exchanges' rank programs share (sparse_allreduce_rank.cc,
// cast_allreduce_rank.cc): the parsed arguments and rendezvous (`env`),
// "CHECK <name> ok|FAILED <why>" lines, groups and authenticators, every
// rank's gradient as a function of (rank, step, bucket), a bitwise
// comparison, and the mismatch and fault scenarios.
#ifndef GRADWIRE_TESTS_COMM_RANK_ENV_H_
#define GRADWIRE_TESTS_COMM_RANK_ENV_H_

#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"
#include "tests/comm/rank_setup.h"

namespace gradwire {

using transport::GlooGroup;

struct Env {
  std::map<std::string, std::string> args;
  transport::RendezvousConfig config;
  std::shared_ptr<transport::RendezvousStore> store;
  int groups = 0;
  int failed = 0;

  std::string Text(const std::string& key, const std::string& otherwise) const {
    const auto it = args.find(key);
    return it != args.end() ? it->second : otherwise;
  }
  int64_t Number(const std::string& key, int64_t otherwise) const {
    int64_t v = 0;
    return absl::SimpleAtoi(Text(key, ""), &v) ? v : otherwise;
  }
  int rank() const { return config.rank; }
  int world() const { return config.world_size; }
};
inline Env env;

inline bool Expect(bool ok, const std::string& name, const std::string& detail = "") {
  std::printf("CHECK %s %s%s\n", name.c_str(), ok ? "ok" : "FAILED ", ok ? "" : detail.c_str());
  std::fflush(stdout);
  if (!ok) ++env.failed;
  return ok;
}
inline bool ExpectOk(const absl::Status& s, const std::string& name) {
  return Expect(s.ok(), name, s.ToString());
}

inline absl::StatusOr<std::unique_ptr<GlooGroup>> NewGroup() {
  transport::GroupOptions options;
  options.timeout = absl::Milliseconds(env.Number("timeout_ms", 20000));
  // direct_max=0: the group gathers by ring, as above 16 ranks, so
  // the exchange agrees by recursive doubling.
  options.direct_allgather_max_ranks = env.Number("direct_max", 16);
  return GlooGroup::Create(env.rank(), env.world(),
                           env.store->Scoped(absl::StrCat("g", env.groups++)), options);
}

inline absl::StatusOr<FrameAuthenticator> NewAuth(const std::string& secret,
                                                  const std::string& job) {
  absl::StatusOr<JobSecret> s = JobSecret::FromValue(secret, "test");
  if (!s.ok()) return s.status();
  return FrameAuthenticator::Create(*s, job);
}

inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s gradient for (step, bucket). dyadic: k/256 for |k| <= 1024
// (equal magnitudes everywhere); smooth: spread over many octaves.
inline std::vector<float> Gradient(int rank, uint64_t step, uint32_t bucket, uint64_t n,
                                   bool dyadic) {
  std::vector<float> g(n);
  const uint64_t seed = Mix(Mix(rank * 131 + 7) ^ Mix(step * 977 + bucket));
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t h = Mix(seed + i);
    if (dyadic) {
      g[i] = static_cast<float>(static_cast<int64_t>(h % 2049) - 1024) / 256.0f;
    } else {
      const float mantissa = static_cast<float>(h & 0xffffff) / 16777216.0f + 0.5f;
      const int octave = static_cast<int>((h >> 24) % 24);
      g[i] = ((h >> 40) & 1 ? -mantissa : mantissa) / static_cast<float>(1 << octave);
    }
  }
  return g;
}

inline std::string Differs(absl::Span<const float> got, absl::Span<const float> want) {
  if (got.size() != want.size()) return absl::StrCat("lengths ", got.size(), ", ", want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (kernels::FloatBits(got[i]) != kernels::FloatBits(want[i])) {
      return absl::StrFormat("element %d: got %.9g, want %.9g", i, got[i], want[i]);
    }
  }
  return "";
}

// The scenarios both exchanges share. `make(spec)` returns a rig (null
// after a failed check) whose Run(bucket, step, &data) runs one exchange.

// kind=length|spec|step (argument "kind"): the last rank disagrees (spec:
// it uses `odd_spec`); every rank must get InvalidArgument "collective
// mismatch" naming it, with its data unchanged.
template <typename MakeRig>
void MismatchScenario(MakeRig make, const std::string& spec, const std::string& odd_spec) {
  const std::string kind = env.Text("kind", "length");
  const bool odd = env.rank() == env.world() - 1;
  auto rig = make(kind == "spec" && odd ? odd_spec : spec);
  if (rig == nullptr) return;
  const uint64_t n = kind == "length" && odd ? 3001 : 3000;
  const uint64_t step = kind == "step" && odd ? 6 : 5;
  std::vector<float> data = Gradient(env.rank(), 0, 0, n, false);
  const std::vector<float> before = data;
  absl::Status s = rig->Run(0, step, &data);
  std::printf("MISMATCH %s\n", s.ToString().c_str());
  Expect(absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "collective mismatch"),
         "mismatch reported", s.ToString());
  Expect(absl::StrContains(s.message(), absl::StrCat(env.world() - 1)), "names the odd rank",
         s.ToString());
  Expect(data == before, "data unchanged");
}

// The last rank exits before step 1; the others must fail with
// Unavailable / DeadlineExceeded within 2x the deadline (timeout_ms).
template <typename MakeRig>
void FaultScenario(MakeRig make, const std::string& spec) {
  const absl::Duration deadline = absl::Milliseconds(env.Number("timeout_ms", 4000));
  auto rig = make(spec);
  if (rig == nullptr) return;
  const bool victim = env.rank() == env.world() - 1;
  for (int step = 0; step < 3; ++step) {
    if (step == 1 && victim) {
      std::fflush(stdout);
      _exit(0);
    }
    std::vector<float> data = Gradient(env.rank(), step, 0, 20000, false);
    const absl::Time start = absl::Now();
    absl::Status s = rig->Run(0, step, &data);
    const absl::Duration took = absl::Now() - start;
    if (step == 0) {
      if (!ExpectOk(s, "step 0")) return;
      continue;
    }
    std::printf("FAULT %s after %.0f ms\n", s.ToString().c_str(), absl::ToDoubleMilliseconds(took));
    Expect(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s), "survivor sees the failure",
           s.ToString());
    Expect(took <= 2 * deadline, "within 2x the deadline", absl::FormatDuration(took));
    return;
  }
}

// A rank program's main: the rendezvous (rank_setup.h) into `env`, then the
// scenario argv[1] names. 0 iff every check passed; 2 if it cannot start.
inline int RunScenario(int argc, char** argv, const std::map<std::string, void (*)()>& scenarios) {
  std::optional<RankSetup> setup = StartRank(argc, argv);
  if (!setup) return 2;
  env.args = setup->args;
  env.config = setup->config;
  env.store = setup->store;
  const auto scenario = scenarios.find(argv[1]);
  if (scenario == scenarios.end()) {
    std::printf("SETUP unknown scenario %s\n", argv[1]);
    return 2;
  }
  scenario->second();
  return env.failed == 0 ? 0 : 1;
}

}  // namespace gradwire

#endif  // GRADWIRE_TESTS_COMM_RANK_ENV_H_
