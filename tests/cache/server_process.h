// The tools/data_server binary run as a child process, like a real remote
// host: started (optionally under a lower descriptor limit), SIGKILLed or
// stopped with SIGTERM, its stderr kept for the test to read.
#ifndef GRADWIRE_TESTS_CACHE_SERVER_PROCESS_H_
#define GRADWIRE_TESTS_CACHE_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gradwire {
namespace cache {
namespace testing {

class ServerProcess {
 public:
  // `scratch` holds the port file and the server's stderr ("stderr").
  ServerProcess(std::string data_dir, std::string token_file, std::string scratch);
  ~ServerProcess() { Kill(); }

  // Extra flags for the next Start, and RLIMIT_NOFILE (soft and hard) for
  // the server process (0: inherited).
  void set_flags(std::vector<std::string> flags) { flags_ = std::move(flags); }
  void set_max_open_files(int n) { max_open_files_ = n; }

  // Starts on `port` (0: any) and waits (bounded) until it listens; the
  // port, or -1 if it did not start.
  int Start(int port);
  void Kill();
  // SIGTERM and wait: the server prints its statistics; returns its stderr.
  std::string Stop();
  std::string ReadStderr() const;
  pid_t pid() const { return pid_; }

 private:
  std::string data_dir_, token_file_, scratch_;
  std::vector<std::string> flags_;
  int max_open_files_ = 0;
  pid_t pid_ = -1;
};

}  // namespace testing
}  // namespace cache
}  // namespace gradwire

#endif  // GRADWIRE_TESTS_CACHE_SERVER_PROCESS_H_
