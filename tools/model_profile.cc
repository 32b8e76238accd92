#include "gradwire/tools/model_profile.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gradwire/lib/cache/atomic_file.h"

namespace gradwire {
namespace tools {
namespace {

std::string Quoted(absl::string_view line) {
  return absl::StrCat("\"", absl::CHexEscape(line.substr(0, 200)),
                      line.size() > 200 ? "...\"" : "\"");
}

bool PlainName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && name[0] != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
         });
}

}  // namespace

absl::StatusOr<Shapes> ParseProfile(absl::string_view text) {
  Shapes shapes;
  uint64_t params = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<int64_t> shape;
    // elements and params stay <= kMaxProfileParams + 1: no product or
    // sum can wrap.
    uint64_t elements = 1;
    for (absl::string_view d : absl::StrSplit(absl::StripAsciiWhitespace(line), 'x')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad shape line ", Quoted(line)));
      }
      const uint64_t u = static_cast<uint64_t>(v);
      elements = u != 0 && elements > kMaxProfileParams / u ? kMaxProfileParams + 1 : elements * u;
      shape.push_back(v);
    }
    params += elements;
    if (params > kMaxProfileParams) {
      return absl::InvalidArgumentError(absl::StrCat("the profile has over ", kMaxProfileParams,
                                                     " parameters (at shape line ", Quoted(line),
                                                     ")"));
    }
    shapes.push_back(std::move(shape));
  }
  if (shapes.empty()) return absl::InvalidArgumentError("profile has no tensors");
  if (params == 0) {
    return absl::InvalidArgumentError("profile has no parameters (every tensor is empty)");
  }
  return shapes;
}

absl::StatusOr<Shapes> ReadProfileFile(const std::string& path) {
  // lib/cache's whole-file read: a regular file only (never waits on a
  // FIFO), at most kMaxProfileBytes, no NUL in the path.
  absl::StatusOr<std::string> text = cache::ReadWholeFile(path, kMaxProfileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("profile file: ", text.status().message()));
  }
  absl::StatusOr<Shapes> shapes = ParseProfile(*text);
  if (!shapes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile file ", path, ": ", shapes.status().message()));
  }
  return shapes;
}

absl::StatusOr<Shapes> RunModelProfiles(const std::string& script, const std::string& name,
                                        int64_t params) {
  std::vector<std::string> args = {"python3", script};
  if (params > 0) {
    if (static_cast<uint64_t>(params) > kMaxProfileParams) {
      return absl::InvalidArgumentError(absl::StrCat("a synthetic profile of ", params,
                                                     " parameters is over ", kMaxProfileParams));
    }
    args.push_back("--params");
    args.push_back(absl::StrCat(params));
  } else {
    if (!PlainName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile ", Quoted(name),
                       " is not a profile name (letters, digits, '_' and '-'; "
                       "`python3 tools/model_profiles.py --help` lists them)"));
    }
    args.push_back(name);
  }
  const std::string shown = absl::StrJoin(args, " ");
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::InternalError(absl::StrCat("pipe for ", shown, ": ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  const int spawned = posix_spawnp(&pid, "python3", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("cannot run ", shown, ": ", std::strerror(spawned)));
  }
  // Read to the end (the child must not block on a full pipe), keeping at
  // most a byte over the limit.
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (text.size() <= kMaxProfileBytes) text.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", shown,
        "\" failed (unknown profile? run from the repository root or name the script's path)"));
  }
  if (text.size() > kMaxProfileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", shown, "\" printed over ", kMaxProfileBytes >> 20, " MiB"));
  }
  return ParseProfile(text);
}

absl::StatusOr<std::vector<ProfileTensor>> MakeProfileTensors(const Shapes& shapes, int rank,
                                                              uint64_t* params) try {
  std::vector<ProfileTensor> tensors(shapes.size());
  *params = 0;
  uint64_t x = 0x9E3779B97F4A7C15ull * (rank + 1);
  for (size_t i = 0; i < shapes.size(); ++i) {
    ProfileTensor& t = tensors[shapes.size() - 1 - i];
    t.name = absl::StrCat("param", i);
    t.shape = shapes[i];
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    *params += n;
    t.pristine.resize(n);
    for (float& v : t.pristine) {  // roughly N(0, 1): sum of uniforms
      float s = 0;
      for (int k = 0; k < 4; ++k) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s += static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f;
      }
      v = s * 1.7f;
    }
    t.grad = t.pristine;
  }
  return tensors;
} catch (const std::bad_alloc&) {
  return absl::ResourceExhaustedError(
      absl::StrCat("cannot allocate the profile's gradients (", *params, " parameters so far)"));
}

}  // namespace tools
}  // namespace gradwire
