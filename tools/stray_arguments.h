// The tools take flags only: what absl::ParseCommandLine leaves besides
// the program name is a mistake (a flag missing its "--", a value split
// off by a space), refused rather than ignored.
#ifndef GRADWIRE_TOOLS_STRAY_ARGUMENTS_H_
#define GRADWIRE_TOOLS_STRAY_ARGUMENTS_H_

#include <cstdio>
#include <vector>

namespace gradwire {
namespace tools {

// True (after printing why, as "TOOL: unexpected argument ...") when
// `rest`, ParseCommandLine's result, holds more than the program name.
inline bool HasStrayArguments(const std::vector<char*>& rest, const char* tool) {
  if (rest.size() <= 1) return false;
  std::fprintf(stderr, "%s: unexpected argument \"%s\" (flags look like --name=value)\n", tool,
               rest[1]);
  return true;
}

}  // namespace tools
}  // namespace gradwire

#endif  // GRADWIRE_TOOLS_STRAY_ARGUMENTS_H_
