// The order in which a rank posts its receives in an exchange where every
// peer sends it one message (the direct allgatherv, AlltoallvBounded), and
// how many it keeps posted at once.
//
// Gloo moves a message only once its receiver has posted the receive (the
// sender announces it; the bytes follow the receiver's answer). A rank that
// keeps at most `window` receives posted therefore has at most `window`
// flows converging on its link. Posting all P - 1 at once starts P - 1 TCP
// flows into every receiver together (incast): on a shallow switch port the
// burst drops packets, and a small message that loses its last packets
// waits out a retransmission timeout (200 ms at least on Linux). Measured on
// 16 emulated hosts (20 Mbit/s, tbf queues of 100 ms), top-k 0.1 % frames of
// ~100 KB per peer: with every receive posted at once 99-106 TCP timeouts
// and 830-940 drops per run; window 8: 20 and 126; window 4: 0 and 6.
//
// The window grows with the group, to at least (P - 1) / 8 sources: at most
// eight waves. Messages of an exchange with every peer shrink as the group
// grows (a region of the reduce-scatter is 1/P of the bucket), so the bytes
// converging at once stay about the same, and the waves' latency stays
// bounded: at P = 64, 8 waves of 8 sources, not 16 of 4.
//
// Sources are staggered: rank r receives first from r - 1, then r - 2, ...,
// so that no rank is everyone's first source. The direct allgatherv posts
// every send at once (a posted send only announces its message);
// AlltoallvBounded posts its sends through a window of the same size, to
// r + 1, r + 2, ... (sparse_collectives.cc says why).
//
// Both post their first window of receives before any send. The receiver's
// answer travels over the pair's one TCP connection, after whatever the
// receiver already queued there: a rank that posted its send first could
// find the peer's answer waiting, start its block, and queue its own answer
// behind that block, so the two blocks crossed one after the other. On
// links without bursts (20 Mbit/s): the 2-host 1 % sparse allreduce 623 ->
// 457 ms, the 4-host 0.1 % allgather 274-277 -> 164-173 ms
// (docs/results/2026-12-01-burst-free-links.md). A receive posted later
// through the window can still queue behind a block already sent to the
// same peer.
#ifndef GRADWIRE_TRANSPORT_RECEIVE_WINDOW_H_
#define GRADWIRE_TRANSPORT_RECEIVE_WINDOW_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gradwire {
namespace transport {

class ReceiveWindow {
 public:
  // GroupOptions::receive_window's default: the smallest window.
  static constexpr int kDefault = 4;
  static constexpr int kMaxWaves = 8;

  // The window for `sources` expected messages: at least `window`, at
  // least sources / kMaxWaves (rounded up); window <= 0: every source.
  static size_t Effective(size_t sources, int window) {
    if (window <= 0) return sources;
    const size_t least = (sources + kMaxWaves - 1) / kMaxWaves;
    return std::min(sources, std::max(static_cast<size_t>(window), least));
  }

  // The peers of `rank` in a group of `size` that `expects(peer)` says send
  // it a message, in staggered order; Effective(their number, window) of
  // them posted at once.
  template <typename Expects>
  ReceiveWindow(int rank, int size, int window, Expects expects) {
    for (int i = 1; i < size; ++i) {
      const int from = (rank - i + size) % size;
      if (expects(from)) sources_.push_back(from);
    }
    in_flight_ = Effective(sources_.size(), window);
  }

  // Every expected source, in the order their receives are posted.
  const std::vector<int>& sources() const { return sources_; }
  // How many receives are posted before the first wait.
  size_t in_flight() const { return in_flight_; }
  // Once `completed` receives have completed (1, 2, ...): the source whose
  // receive to post now, or -1 when every one is posted.
  int PostAfter(size_t completed) const {
    const size_t next = completed - 1 + in_flight_;
    return completed >= 1 && next < sources_.size() ? sources_[next] : -1;
  }

 private:
  std::vector<int> sources_;
  size_t in_flight_ = 0;
};

}  // namespace transport
}  // namespace gradwire

#endif  // GRADWIRE_TRANSPORT_RECEIVE_WINDOW_H_
