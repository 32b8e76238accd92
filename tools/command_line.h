// What every tool's main does with its command line besides
// absl::ParseCommandLine: --help that exits 0 (abseil 20220623 exits 1
// after printing it), a --flagfile that is not a regular file refused
// (abseil reads a directory as an empty file and a FIFO until it is
// written), flag files that nest for ever refused, and arguments that are
// not flags refused rather than ignored.
//
//   int main(int argc, char** argv) {
//     int exit_code = 0;
//     if (!gradwire::tools::ParseToolCommandLine(argc, argv, "tool", &exit_code)) {
//       return exit_code;
//     }
//     ...
#ifndef GRADWIRE_TOOLS_COMMAND_LINE_H_
#define GRADWIRE_TOOLS_COMMAND_LINE_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gradwire/lib/cache/atomic_file.h"

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

// The value of a --flagfile argument (--flagfile=A,B or -flagfile=A), or
// nullopt when `arg` is another flag. `*bare` is set when it is the flag's
// name alone ("--flagfile", its value the next argument).
inline std::optional<absl::string_view> FlagFileValue(absl::string_view arg, bool* bare) {
  *bare = false;
  if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
  if (!absl::ConsumePrefix(&arg, "flagfile")) return std::nullopt;
  if (absl::ConsumePrefix(&arg, "=")) return arg;
  if (arg.empty()) *bare = true;
  return std::nullopt;
}

// Flag files are small; abseil reads them whole, and their nesting has no
// end of its own (a file that names itself loops for ever).
inline constexpr uint64_t kMaxFlagFileBytes = uint64_t{1} << 20;
inline constexpr int kMaxFlagFileNesting = 8;

// True (after printing why, as "TOOL: --flagfile ...") when a file of the
// comma-separated `list` exists and is not a regular file of at most
// kMaxFlagFileBytes (lib/cache's ReadWholeFile, which does not wait on a
// FIFO), or one of its lines ("--flagfile=...", as abseil reads them) names
// such a file, or the files nest more than kMaxFlagFileNesting deep. A
// missing file is left to abseil, which says it cannot open it.
inline bool HasBadFlagFileList(absl::string_view list, const char* tool, int depth) {
  for (absl::string_view path : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const std::string p(path);
    if (depth > kMaxFlagFileNesting) {
      std::fprintf(stderr,
                   "%s: --flagfile %s: flag files nested more than %d deep (one names itself?)\n",
                   tool, p.c_str(), kMaxFlagFileNesting);
      return true;
    }
    absl::StatusOr<std::string> text = cache::ReadWholeFile(p, kMaxFlagFileBytes);
    if (!text.ok()) {
      if (absl::IsNotFound(text.status())) continue;
      std::fprintf(stderr, "%s: --flagfile %s\n", tool,
                   std::string(text.status().message()).c_str());
      return true;
    }
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      bool bare = false;
      std::optional<absl::string_view> nested =
          FlagFileValue(absl::StripAsciiWhitespace(line), &bare);
      if (nested && HasBadFlagFileList(*nested, tool, depth + 1)) return true;
    }
  }
  return false;
}

// True (after printing why) when a --flagfile given on the command line
// (--flagfile=A,B, -flagfile=A or --flagfile A, before any "--") is bad as
// HasBadFlagFileList says.
inline bool HasBadFlagFiles(int argc, char** argv, const char* tool) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    bool bare = false;
    std::optional<absl::string_view> value = FlagFileValue(a, &bare);
    if (bare && i + 1 < argc) value = argv[++i];
    // Otherwise another flag, or abseil's own "missing value".
    if (value && HasBadFlagFileList(*value, tool, 1)) return true;
  }
  return false;
}

// Everything above in order, then absl::ParseCommandLine. Returns true
// when main goes on; false when it returns *exit_code: 0 after --help, 2
// after a bad --flagfile or a stray argument (abseil itself exits 1 on an
// unknown flag or a bad value).
inline bool ParseToolCommandLine(int argc, char** argv, const char* tool, int* exit_code) {
  *exit_code = 0;
  if (PrintedHelp(argc, argv)) return false;
  *exit_code = 2;
  if (HasBadFlagFiles(argc, argv, tool)) return false;
  if (HasStrayArguments(absl::ParseCommandLine(argc, argv), tool)) return false;
  *exit_code = 0;
  return true;
}

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_COMMAND_LINE_H_
