#include "gradwire/lib/cache/prefetcher.h"

#include <algorithm>
#include <cmath>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gradwire/lib/cache/epoch_order.h"

namespace gradwire {
namespace cache {

size_t Prefetcher::DepthFor(absl::Duration latency, double bytes_per_second, double item_bytes,
                            size_t lo, size_t hi) {
  if (item_bytes <= 0 || bytes_per_second <= 0 || latency <= absl::ZeroDuration()) return lo;
  double d = std::ceil(absl::ToDoubleSeconds(latency) * bytes_per_second / item_bytes);
  if (!(d < static_cast<double>(hi))) return hi;
  return std::max(lo, static_cast<size_t>(d));
}

absl::StatusOr<std::unique_ptr<Prefetcher>> Prefetcher::ForEpoch(
    DataCache* cache, const std::vector<std::string>& keys, uint64_t seed, uint64_t epoch, int rank,
    int world, const Options& options) {
  if (cache == nullptr) return absl::InvalidArgumentError("prefetcher: no cache");
  absl::StatusOr<std::vector<std::string>> order = EpochOrder(keys, seed, epoch, rank, world);
  if (!order.ok()) return order.status();
  return std::make_unique<Prefetcher>(cache, *std::move(order), options);
}

Prefetcher::Prefetcher(DataCache* cache, std::vector<std::string> order, const Options& options)
    : cache_(cache),
      order_(std::move(order)),
      options_(options),
      start_(absl::Now()),
      slots_(order_.size()),
      depth_(options.depth > 0 ? options.depth : std::max<size_t>(options.min_depth, 1)) {
  // At least one worker; more only as the system gives threads (a refused
  // one once aborted the process: std::thread's system_error escaped the
  // constructor). The workers started so far do all the work.
  const int threads = std::max(1, options_.threads);
  for (int i = 0; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {
      if (workers_.empty()) throw;
      break;
    }
  }
}

Prefetcher::~Prefetcher() { Shutdown(); }

void Prefetcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  room_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

size_t Prefetcher::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return depth_;
}

void Prefetcher::UpdateDepthLocked(absl::Duration latency, size_t from_source, uint64_t bytes,
                                   size_t items) {
  fetched_bytes_ += bytes;
  fetched_items_ += items;
  if (options_.depth > 0) return;
  // Only round trips that reached the source say anything about latency.
  if (from_source > 0) min_latency_ = std::min(min_latency_, latency);
  if (min_latency_ == absl::InfiniteDuration() || fetched_items_ == 0) return;
  double bandwidth = options_.bandwidth_bytes_per_second;
  if (bandwidth <= 0) {
    double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
    bandwidth = elapsed > 0 ? fetched_bytes_ / elapsed : 0;
  }
  // Several bandwidth-delay products: while one batch is still arriving
  // the next must already be requested, and a measured rate must be able
  // to grow past itself. The smallest latency seen is used, not the
  // latest: latency that grows because our own requests queue on a
  // saturated link must not grow the depth (it would feed on itself).
  depth_ =
      DepthFor(std::max(1.0, options_.headroom) * min_latency_, bandwidth,
               double(fetched_bytes_) / fetched_items_, options_.min_depth, options_.max_depth);
}

size_t Prefetcher::BatchLocked() const {
  const size_t threads = static_cast<size_t>(std::max(1, options_.threads));
  size_t batch = std::max<size_t>(options_.min_batch, (depth_ + threads - 1) / threads);
  return std::max<size_t>(1, std::min({batch, depth_, options_.max_batch,
                                       order_.size() - std::min(claim_, order_.size())}));
}

void Prefetcher::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Wake for a whole batch of room, not for every object the reader
    // takes: waking eight workers per object would cost more than the
    // fetch itself once the data is in memory.
    room_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] {
      return stopping_ || claim_ >= order_.size() || claim_ + BatchLocked() <= next_ + depth_;
    });
    if (stopping_ || claim_ >= order_.size()) return;
    if (claim_ + BatchLocked() > next_ + depth_) continue;
    const size_t batch = BatchLocked();
    const size_t begin = claim_;
    claim_ += batch;
    lock.unlock();

    absl::Time t0 = absl::Now();
    size_t from_source = 0;
    std::vector<absl::StatusOr<Blob>> results =
        cache_->Fetch(absl::MakeConstSpan(order_.data() + begin, batch), &from_source);
    absl::Duration latency = absl::Now() - t0;
    uint64_t bytes = 0;
    for (const auto& r : results) {
      if (r.ok()) bytes += (*r)->size();
    }

    lock.lock();
    for (size_t i = 0; i < batch; ++i) slots_[begin + i] = std::move(results[i]);
    UpdateDepthLocked(latency, from_source, bytes, batch);
    if (reader_waiting_) ready_cv_.notify_one();
  }
}

absl::StatusOr<Blob> Prefetcher::Next() {
  if (!taken_.empty()) {
    absl::StatusOr<Blob> result = std::move(taken_.front());
    taken_.pop_front();
    return result;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (next_ >= order_.size()) return absl::OutOfRangeError("prefetcher: end of epoch");
  const size_t at = next_;
  absl::Duration waited = absl::ZeroDuration();
  if (!slots_[at].has_value()) {
    absl::Time start = absl::Now();
    reader_waiting_ = true;
    ready_cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.item_timeout),
                       [&] { return stopping_ || slots_[at].has_value(); });
    reader_waiting_ = false;
    waited = absl::Now() - start;
    if (!slots_[at].has_value()) {
      lock.unlock();
      cache_->AddStall(waited);
      if (stopping_) return absl::CancelledError("prefetcher: shut down");
      return absl::DeadlineExceededError(absl::StrCat("prefetcher: '", order_[at], "' (position ",
                                                      at, ") not fetched within ",
                                                      absl::FormatDuration(options_.item_timeout)));
    }
  }
  absl::StatusOr<Blob> result = std::move(*slots_[at]);
  slots_[at].reset();
  next_ = at + 1;
  // Take the run of objects that are already here.
  while (next_ < order_.size() && slots_[next_].has_value() && taken_.size() < 1024) {
    taken_.push_back(std::move(*slots_[next_]));
    slots_[next_].reset();
    ++next_;
  }
  const size_t batch = BatchLocked();
  const size_t room = claim_ < order_.size() && claim_ + batch <= next_ + depth_
                          ? (next_ + depth_ - claim_) / batch
                          : 0;
  lock.unlock();
  if (room == 1) room_cv_.notify_one();
  if (room > 1) room_cv_.notify_all();
  if (waited > absl::ZeroDuration()) cache_->AddStall(waited);
  return result;
}

}  // namespace cache
}  // namespace gradwire
