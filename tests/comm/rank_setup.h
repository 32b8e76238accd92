// The start every rank program of the comm tests shares: the scenario
// name, key=value arguments after it, the rendezvous config from the
// launcher's environment and the store it names.
#ifndef GRADWIRE_TESTS_COMM_RANK_SETUP_H_
#define GRADWIRE_TESTS_COMM_RANK_SETUP_H_

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gradwire/transport/rendezvous_config.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {

struct RankSetup {
  std::string scenario;
  std::map<std::string, std::string> args;
  transport::RendezvousConfig config;
  std::shared_ptr<transport::RendezvousStore> store;
};

// argv: <program> <scenario> [key=value ...]. Prints the usage (stderr) or
// "SETUP <error>" (stdout, which the test driver reads) and returns nullopt
// when the program cannot start.
inline std::optional<RankSetup> StartRank(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <scenario> [key=value ...]\n", argv[0]);
    return std::nullopt;
  }
  RankSetup setup;
  setup.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::vector<std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    if (kv.size() == 2) setup.args[kv[0]] = kv[1];
  }
  auto config = transport::ConfigFromEnvironment(transport::RendezvousConfig());
  if (!config.ok()) {
    std::printf("SETUP %s\n", config.status().ToString().c_str());
    return std::nullopt;
  }
  setup.config = *config;
  auto store = transport::RendezvousStore::Open(setup.config);
  if (!store.ok()) {
    std::printf("SETUP %s\n", store.status().ToString().c_str());
    return std::nullopt;
  }
  setup.store = *store;
  return setup;
}

}  // namespace gradwire

#endif  // GRADWIRE_TESTS_COMM_RANK_SETUP_H_
