// What every tool's main does with its command line besides
// absl::ParseCommandLine: --help that exits 0 (abseil 20220623 exits 1
// after printing it), and arguments that are not flags refused rather
// than ignored.
//
//   int main(int argc, char** argv) {
//     if (gradwire::tools::PrintedHelp(argc, argv)) return 0;
//     if (gradwire::tools::HasStrayArguments(absl::ParseCommandLine(argc, argv), "tool")) {
//       return 2;
//     }
//     ...
#ifndef GRADWIRE_TOOLS_COMMAND_LINE_H_
#define GRADWIRE_TOOLS_COMMAND_LINE_H_

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/string_view.h"

namespace gradwire {
namespace tools {

// With --help, -help, --helpfull or -h before any "--": prints the usage
// message and the flags defined under tools/ (name, default, help) to
// stdout and returns true; the caller exits 0. Otherwise false.
inline bool PrintedHelp(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc && !asked; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    asked = a == "--help" || a == "-help" || a == "--helpfull" || a == "-helpfull" || a == "-h";
  }
  if (!asked) return false;
  const absl::string_view usage = absl::ProgramUsageMessage();
  if (usage.empty() || usage.find("Warning: SetProgramUsageMessage") != absl::string_view::npos) {
    std::printf("usage: %s [--flag=value ...]\n", argc > 0 ? argv[0] : "tool");
  } else {
    std::printf("%.*s\n", static_cast<int>(usage.size()), usage.data());
  }
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("tools/") != absl::string_view::npos) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::printf("\nflags:\n");
  for (const absl::CommandLineFlag* f : flags) {
    std::printf("  --%s (default: \"%s\")\n      %s\n", std::string(f->Name()).c_str(),
                f->DefaultValue().c_str(), f->Help().c_str());
  }
  return true;
}

// True (after printing why, as "TOOL: unexpected argument ...") when
// `rest`, ParseCommandLine's result, holds more than the program name: a
// flag missing its "--", or a value split off by a space.
inline bool HasStrayArguments(const std::vector<char*>& rest, const char* tool) {
  if (rest.size() <= 1) return false;
  std::fprintf(stderr, "%s: unexpected argument \"%s\" (flags look like --name=value)\n", tool,
               rest[1]);
  return true;
}

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_COMMAND_LINE_H_
