#include "gradwire/transport/gloo_connect.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/transport/gloo_status.h"

namespace gradwire {
namespace transport {

void IgnoreSigpipeIfDefault() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateTcpDevice(
    const std::string& bind_address, int event_loop_nice) {
  gloo::transport::tcp::attr attr;
  attr.hostname = bind_address;
  std::shared_ptr<gloo::transport::Device> device;
  absl::Status status;
  auto create = [&] {
    status = CallGloo(absl::StrCat("creating TCP device on ", bind_address),
                      [&] { device = gloo::transport::tcp::CreateDevice(attr); });
  };
  if (event_loop_nice == 0) {
    create();
  } else {
    std::thread([&] {
      const id_t self = static_cast<id_t>(syscall(SYS_gettid));
      errno = 0;
      const int current = getpriority(PRIO_PROCESS, self);
      if (errno == 0) setpriority(PRIO_PROCESS, self, std::min(19, current + event_loop_nice));
      create();
    }).join();
  }
  GRADWIRE_RETURN_IF_ERROR(status);
  return device;
}

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectFullMesh(
    int rank, int size, std::shared_ptr<RendezvousStore> store,
    std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout,
    const std::string& what) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(GlooTimeout(timeout));
  const absl::Duration deadline = store->timeout() + timeout;
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, context, store, device, what]() mutable {
    absl::Status s = CallGloo(what, [&] { context->connectFullMesh(*store, device); });
    std::lock_guard<std::mutex> lock(outcome->mu);
    outcome->status = s;
    outcome->done = true;
    outcome->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mu);
  if (!outcome->cv.wait_for(lock, absl::ToChronoMilliseconds(deadline),
                            [&] { return outcome->done; })) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": not connected after ", absl::FormatDuration(deadline),
        " (store timeout + connect timeout); a peer may have died or a stray connection "
        "took its place"));
  }
  GRADWIRE_RETURN_IF_ERROR(outcome->status);
  return std::shared_ptr<gloo::Context>(std::move(context));
}

}  // namespace transport
}  // namespace gradwire
