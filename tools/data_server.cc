// data_server: serves a packed dataset (tools/pack_dataset) over gRPC to
// the cache's RemoteTier.
//
//   data_server --data_dir=/srv/fmnist --address=0.0.0.0:7070 --token_file=/run/job.token
//
// The token is read from a file, not a flag, so it does not appear in ps
// (lib/cache/token.h: surrounding whitespace is stripped). The server
// listens on exactly --address; with port 0 it picks a free port and,
// given --port_file, writes it there (atomically) once it is listening.
// SIGINT/SIGTERM stop it, giving running calls --shutdown_grace_ms to
// finish, and it prints what it served (lib/cache/data_server.h, Stats).
#include "gradwire/lib/cache/data_server.h"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gradwire/lib/cache/atomic_file.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/token.h"
#include "gradwire/tools/command_line.h"

ABSL_FLAG(std::string, data_dir, "", "packed dataset directory (MANIFEST + shards), required");
ABSL_FLAG(std::string, address, "127.0.0.1:0", "listen address host:port (port 0 = any free)");
ABSL_FLAG(std::string, token_file, "", "file holding the job's token (required)");
ABSL_FLAG(std::string, port_file, "", "if set, the bound port is written here once listening");
ABSL_FLAG(int, max_message_bytes, 4 << 20, "gRPC message cap, both directions");
ABSL_FLAG(int, chunk_bytes, 1 << 20, "default chunk size for streamed objects");
ABSL_FLAG(bool, verify_shards, true, "checksum every shard at start");
ABSL_FLAG(int, response_delay_ms, 0,
          "benchmarks only: delay each reply, emulating a distant store where tc netem is missing");
ABSL_FLAG(int, shutdown_grace_ms, 2000, "how long running calls may finish on SIGTERM");
ABSL_FLAG(int, max_connections, 0,
          "open connections at most (0: from the descriptor limit, at most 4096)");
ABSL_FLAG(int, handshake_timeout_ms, 10000,
          "close a connection that has not finished its HTTP/2 handshake within this");
ABSL_FLAG(int, max_connection_idle_ms, 120000, "close a connection with no call for this long");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "data_server: %s\n", message.c_str());
  return 1;
}

}  // namespace

// An exception (std::bad_alloc from a shard too large to verify in memory)
// ends the server with a message, not an abort.
int main(int argc, char** argv) try {
  int exit_code = 0;
  if (!gradwire::tools::ParseToolCommandLine(argc, argv, "data_server", &exit_code)) return exit_code;
  using gradwire::cache::DataServer;
  using gradwire::cache::DirectorySource;
  if (absl::GetFlag(FLAGS_data_dir).empty()) return Fail("--data_dir is required");
  if (absl::GetFlag(FLAGS_token_file).empty()) return Fail("--token_file is required");
  if (absl::GetFlag(FLAGS_shutdown_grace_ms) < 0 ||
      absl::GetFlag(FLAGS_shutdown_grace_ms) > 3600000) {
    return Fail("--shutdown_grace_ms must be in 0..3600000");
  }

  auto token = gradwire::cache::ReadTokenFile(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(token.status().ToString());

  DirectorySource::Options source_options;
  source_options.verify_shards = absl::GetFlag(FLAGS_verify_shards);
  auto source = DirectorySource::Open(absl::GetFlag(FLAGS_data_dir), source_options);
  if (!source.ok()) return Fail(source.status().ToString());

  DataServer::Options options;
  options.address = absl::GetFlag(FLAGS_address);
  options.token = *token;
  if (absl::GetFlag(FLAGS_max_connections) < 0) return Fail("--max_connections must be >= 0");
  options.max_connections = absl::GetFlag(FLAGS_max_connections);
  if (absl::GetFlag(FLAGS_handshake_timeout_ms) < 1 ||
      absl::GetFlag(FLAGS_max_connection_idle_ms) < 1) {
    return Fail("--handshake_timeout_ms and --max_connection_idle_ms must be >= 1");
  }
  options.handshake_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_handshake_timeout_ms));
  options.max_connection_idle = absl::Milliseconds(absl::GetFlag(FLAGS_max_connection_idle_ms));
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (absl::GetFlag(FLAGS_response_delay_ms) < 0) return Fail("--response_delay_ms must be >= 0");
  options.response_delay = absl::Milliseconds(absl::GetFlag(FLAGS_response_delay_ms));
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1024) return Fail("--chunk_bytes must be >= 1024");
  options.default_chunk_bytes = static_cast<uint32_t>(absl::GetFlag(FLAGS_chunk_bytes));
  std::shared_ptr<gradwire::cache::DataSource> shared(std::move(*source));
  const std::string described = shared->Describe();
  const uint64_t version = shared->manifest().version();
  // Block the stop signals before gRPC starts its threads, so they all
  // inherit the mask and the signal reaches sigwait below; not before:
  // until here a stop signal ends the process at once, even one stuck
  // reading its token or dataset.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto server = DataServer::Start(shared, options);
  if (!server.ok()) return Fail(server.status().ToString());

  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    std::string dir = ".", name = port_file;
    size_t slash = port_file.rfind('/');
    if (slash != std::string::npos) {
      dir = port_file.substr(0, slash);
      name = port_file.substr(slash + 1);
    }
    absl::Status written = gradwire::cache::WriteFileAtomically(
        dir.empty() ? "/" : dir, name, absl::StrCat((*server)->port(), "\n"));
    if (!written.ok()) return Fail(written.ToString());
  }
  std::fprintf(stderr, "data_server: serving %s (version %016llx) on port %d\n", described.c_str(),
               static_cast<unsigned long long>(version), (*server)->port());

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::fprintf(stderr, "data_server: signal %d, shutting down\n", signal_number);
  (*server)->Shutdown(absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms)));
  std::fprintf(stderr, "data_server: %s\n",
               gradwire::cache::FormatServerStats((*server)->stats()).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "data_server: %s\n", e.what());
  return 1;
}
