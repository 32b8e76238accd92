// What the region exchanges' rank programs share (sparse_allreduce_rank.cc,
// cast_allreduce_rank.cc): the parsed arguments and rendezvous (`env`),
// "CHECK <name> ok|FAILED <why>" lines, groups and authenticators, every
// rank's gradient as a function of (rank, step, bucket), and a bitwise
// comparison.
#ifndef GRADWIRE_TESTS_COMM_RANK_ENV_H_
#define GRADWIRE_TESTS_COMM_RANK_ENV_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gradwire/kernels/element_math.h"
#include "gradwire/lib/codec/frame_auth.h"
#include "gradwire/transport/gloo_group.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

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
  // direct_max=0: the group gathers by Gloo's ring, as above 16 ranks, so
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

}  // namespace gradwire

#endif  // GRADWIRE_TESTS_COMM_RANK_ENV_H_
