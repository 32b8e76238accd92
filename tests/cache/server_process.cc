#include "gradwire/tests/cache/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/atomic_file.h"

namespace gradwire {
namespace cache {
namespace testing {

ServerProcess::ServerProcess(std::string data_dir, std::string token_file, std::string scratch)
    : data_dir_(std::move(data_dir)),
      token_file_(std::move(token_file)),
      scratch_(std::move(scratch)) {}

int ServerProcess::Start(int port) {
  const std::string port_file = scratch_ + "/port";
  unlink(port_file.c_str());
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::string binary =
      absl::StrCat(srcdir != nullptr ? srcdir : ".", "/gradwire/tools/data_server");
  std::vector<std::string> args = {binary, "--data_dir=" + data_dir_, "--token_file=" + token_file_,
                                   "--port_file=" + port_file,
                                   absl::StrCat("--address=127.0.0.1:", port)};
  args.insert(args.end(), flags_.begin(), flags_.end());
  const std::string err = scratch_ + "/stderr";
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 2);
    if (max_open_files_ > 0) {
      struct rlimit limit = {static_cast<rlim_t>(max_open_files_),
                             static_cast<rlim_t>(max_open_files_)};
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto text = ReadWholeFile(port_file);
    if (text.ok() && !text->empty()) return std::atoi(text->c_str());
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

void ServerProcess::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::string ServerProcess::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  return ReadStderr();
}

std::string ServerProcess::ReadStderr() const {
  auto text = ReadWholeFile(scratch_ + "/stderr");
  return text.ok() ? *text : "";
}

}  // namespace testing
}  // namespace cache
}  // namespace gradwire
