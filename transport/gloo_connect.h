// Getting a connected Gloo context: a TCP device and a full mesh of
// connections to the other ranks, with the workarounds Gloo's TCP
// transport needs to keep gradwire's promises (nothing kills the process,
// nothing waits without a deadline, a shared machine can deprioritise
// Gloo's event loop). GlooGroup::Create and GlooGroup::Split use these.
#ifndef GRADWIRE_TRANSPORT_GLOO_CONNECT_H_
#define GRADWIRE_TRANSPORT_GLOO_CONNECT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/transport/gloo_fwd.h"
#include "gradwire/transport/rendezvous_store.h"

namespace gradwire {
namespace transport {

// Sets SIGPIPE to ignored if it still has its default action. Gloo's TCP
// transport writes with writev(2), which raises SIGPIPE when the peer has
// gone; the default action kills the process, so one dead rank would take
// every survivor down with it (measured: survivors exiting with signal 13
// in the SIGKILL test). Ignored, the write fails with EPIPE and becomes an
// Unavailable status. A process that installed its own handler keeps it.
void IgnoreSigpipeIfDefault();

// A TCP device bound to the numeric address `bind_address`. Its
// constructor starts Gloo's event-loop thread, whose nice value is raised
// by `event_loop_nice` (GroupOptions::event_loop_nice, 0..19; 0 leaves the
// thread as created). A Linux thread inherits its creator's nice value,
// so the device is created by a short-lived thread that first raises its
// own: the calling thread keeps its nice value, and raising one needs no
// privilege.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateTcpDevice(
    const std::string& bind_address, int event_loop_nice);

// Rank `rank` of `size` publishes its address in `store` and connects to
// every other rank over `device`; collectives on the returned context
// wait at most `timeout` per operation.
//
// The connect runs under a hard deadline of store->timeout() + timeout.
// Gloo's TCP pair connect can overrun its own timeout: after a stray
// connection took a listening pair, we measured "Connect timeout" only
// after 5x the configured timeout (20 s for 4 s). So the connect runs on a
// thread of its own; past the deadline the caller gets DeadlineExceeded
// and the thread is abandoned, keeping what it uses alive until Gloo gives
// up on its own. `what` names the rendezvous in errors.
absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectFullMesh(
    int rank, int size, std::shared_ptr<RendezvousStore> store,
    std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout,
    const std::string& what);

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_GLOO_CONNECT_H_
