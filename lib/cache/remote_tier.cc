#include "gradwire/lib/cache/remote_tier.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gradwire/base/status_macros.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/data_service.grpc.pb.h"
#include "gradwire/lib/cache/token.h"

namespace gradwire {
namespace cache {
namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

// Bytes this client found damaged in transit: DataLoss, marked so that it
// is retried, unlike the server's DATA_LOSS (its stored copy is damaged).
constexpr char kTransitPayload[] = "gradwire.cache/transit";

absl::Status TransitDamage(absl::string_view what) {
  absl::Status s = absl::DataLossError(what);
  s.SetPayload(kTransitPayload, absl::Cord());
  return s;
}

// Worth another attempt: the server may be restarting, shedding
// connections, out of threads, or the bytes were damaged in transit.
// Everything else would fail the same way (remote_tier.h lists both).
bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s) ||
         absl::IsAborted(s) || s.GetPayload(kTransitPayload).has_value();
}

// Splits `n` keys into calls of at most max_keys keys and about max_bytes
// request bytes each; returns the end index of each call.
std::vector<size_t> BatchEnds(absl::Span<const std::string> keys, const std::vector<size_t>& todo,
                              size_t max_keys, size_t max_bytes) {
  std::vector<size_t> ends;
  size_t count = 0, bytes = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    const size_t key_bytes = keys[todo[i]].size() + 8;
    if (count > 0 && (count == max_keys || bytes + key_bytes > max_bytes)) {
      ends.push_back(i);
      count = bytes = 0;
    }
    ++count;
    bytes += key_bytes;
  }
  if (count > 0) ends.push_back(todo.size());
  return ends;
}

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

constexpr char kTokenHeader[] = "x-gradwire-token";

}  // namespace

class RemoteTier::Impl {
 public:
  explicit Impl(const Options& options) : options_(options), rng_(std::random_device()()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(options.max_message_bytes);
    args.SetMaxSendMessageSize(options.max_message_bytes);
    // gRPC's default reconnect backoff grows to 120 s: a restarted server
    // would stay unused for minutes. Cap it at 1 s.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Also the shortest time a connection attempt is given: at 100 ms an
    // attempt not yet handled (a busy host, a shedding server) was
    // abandoned and the next one waited for gRPC's 5 s backup poller.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    channel_ = grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args);
    stub_ = proto::DataService::NewStub(channel_);
  }

  // Runs attempt(deadline) until it succeeds, fails for good, or the
  // read's overall deadline passes.
  template <typename Attempt>
  absl::Status WithRetries(absl::string_view what, Attempt attempt) {
    const absl::Time overall = absl::Now() + options_.read_timeout;
    absl::Duration backoff = options_.initial_backoff;
    absl::Status status;
    for (int n = 1;; ++n) {
      calls_.fetch_add(1, std::memory_order_relaxed);
      absl::Time deadline = std::min(absl::Now() + options_.call_timeout, overall);
      status = attempt(deadline);
      if (status.ok() || !Transient(status)) break;
      absl::Duration sleep = backoff * Jitter();
      if ((options_.max_attempts > 0 && n >= options_.max_attempts) ||
          absl::Now() + sleep >= overall) {
        status = absl::Status(status.code(),
                              absl::StrCat(status.message(), " (gave up after ", n, " attempts)"));
        break;
      }
      retries_.fetch_add(1, std::memory_order_relaxed);
      absl::SleepFor(sleep);
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
    if (!status.ok()) {
      failures_.fetch_add(1, std::memory_order_relaxed);
      // wait_for_ready turns "connection refused" into a deadline: say
      // when the channel never connected, so the message points at the
      // address rather than at a slow server.
      const grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/false);
      const bool never_connected =
          (absl::IsDeadlineExceeded(status) || absl::IsUnavailable(status)) &&
          (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_CONNECTING ||
           state == GRPC_CHANNEL_IDLE);
      return absl::Status(
          status.code(),
          absl::StrCat(what, " from ", options_.target, ": ", status.message(),
                       never_connected ? " (no connection to it: is a data server listening "
                                         "there, and is the address reachable?)"
                                       : ""));
    }
    return status;
  }

  void Authorize(grpc::ClientContext* context, absl::Time deadline) {
    context->set_deadline(ToChrono(deadline));
    // An attempt waits (within its deadline) for a connection instead of
    // failing at once while the channel reconnects; it also keeps the
    // connection attempt polled, so it completes as soon as it can.
    context->set_wait_for_ready(true);
    // Connect normalized the token (token.h): gRPC accepts it as metadata.
    if (!options_.token.empty()) context->AddMetadata(kTokenHeader, options_.token);
  }

  absl::Status FetchManifest() {
    std::string text;
    GRADWIRE_RETURN_IF_ERROR(WithRetries("GetManifest", [&](absl::Time deadline) {
      grpc::ClientContext context;
      Authorize(&context, deadline);
      proto::GetManifestRequest request;
      proto::GetManifestReply reply;
      GRADWIRE_RETURN_IF_ERROR(
          FromGrpc(stub_->GetManifest(&context, request, &reply), "GetManifest"));
      text = reply.manifest();
      return absl::OkStatus();
    }));
    absl::StatusOr<Manifest> manifest = Manifest::Parse(text);
    if (!manifest.ok()) return manifest.status();
    if (options_.expected_version != 0 && manifest->version() != options_.expected_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          options_.target, " serves dataset version ", ChecksumToHex(manifest->version()),
          ", expected ", ChecksumToHex(options_.expected_version)));
    }
    manifest_ = *std::move(manifest);
    return absl::OkStatus();
  }

  absl::StatusOr<Blob> Get(absl::string_view key) {
    std::string data;
    absl::Status status = WithRetries(absl::StrCat("Get '", key, "'"), [&](absl::Time deadline) {
      grpc::ClientContext context;
      Authorize(&context, deadline);
      proto::GetRequest request;
      request.set_key(std::string(key));
      request.set_dataset_version(manifest_.version());
      request.set_chunk_bytes(options_.chunk_bytes);
      std::unique_ptr<grpc::ClientReader<proto::Chunk>> reader = stub_->Get(&context, request);
      proto::Chunk chunk;
      data.clear();
      uint64_t total = 0, checksum = 0;
      bool first = true;
      while (reader->Read(&chunk)) {
        if (first) {
          total = chunk.total_bytes();
          checksum = chunk.checksum();
          first = false;
        }
        if (chunk.total_bytes() != total || chunk.checksum() != checksum ||
            chunk.offset() != data.size() || chunk.data().size() > total - data.size()) {
          context.TryCancel();
          reader->Finish();
          return TransitDamage("inconsistent chunk stream");
        }
        data += chunk.data();
      }
      GRADWIRE_RETURN_IF_ERROR(FromGrpc(reader->Finish(), "stream"));
      if (data.size() != total) return TransitDamage("stream ended early");
      if (Checksum64(data) != checksum) return TransitDamage("checksum mismatch in transit");
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    bytes_.fetch_add(data.size(), std::memory_order_relaxed);
    return MakeBlob(std::move(data));
  }

  std::vector<absl::StatusOr<Blob>> GetBatch(absl::Span<const std::string> keys) {
    std::vector<absl::StatusOr<Blob>> out(keys.size(), absl::UnavailableError("not fetched"));
    std::vector<size_t> todo;
    for (size_t i = 0; i < keys.size(); ++i) {
      // Whole shards may exceed the message cap: those go through chunked Get.
      if (keys[i].find('/') == std::string::npos) {
        out[i] = Get(keys[i]);
      } else {
        todo.push_back(i);
      }
    }
    // The server refuses more than its max_batch_keys keys per call, and a
    // request must fit the message cap: larger fetches take several calls.
    size_t begin = 0;
    for (size_t end : BatchEnds(keys, todo, static_cast<size_t>(options_.max_batch_keys),
                                static_cast<size_t>(options_.max_message_bytes) / 2)) {
      GetBatchCall(keys, std::vector<size_t>(todo.begin() + begin, todo.begin() + end), &out);
      begin = end;
    }
    return out;
  }

  // One GetBatch call (with retries) for keys[i], i in `todo`.
  void GetBatchCall(absl::Span<const std::string> keys, std::vector<size_t> todo,
                    std::vector<absl::StatusOr<Blob>>* out) {
    absl::Status status =
        WithRetries(absl::StrCat("GetBatch of ", todo.size(), " keys"), [&](absl::Time deadline) {
          grpc::ClientContext context;
          Authorize(&context, deadline);
          proto::GetBatchRequest request;
          request.set_dataset_version(manifest_.version());
          request.set_max_message_bytes(static_cast<uint32_t>(options_.max_message_bytes));
          for (size_t i : todo) request.add_keys(keys[i]);
          std::unique_ptr<grpc::ClientReader<proto::Items>> reader =
              stub_->GetBatch(&context, request);
          proto::Items items;
          size_t received = 0;
          absl::Status bad;
          while (bad.ok() && reader->Read(&items)) {
            if (received + items.data_size() > todo.size()) {
              bad = TransitDamage("server sent more objects than asked for");
              break;
            }
            Checksum64Stream checksum;
            for (const std::string& d : items.data()) checksum.Update(d);
            if (checksum.Digest() != items.checksum()) {
              bad = TransitDamage("batch damaged in transit");
              break;
            }
            std::vector<bool> missing(items.data_size(), false);
            for (uint32_t m : items.not_found()) {
              if (m < missing.size()) missing[m] = true;
            }
            for (int j = 0; j < items.data_size(); ++j) {
              const std::string& key = keys[todo[received]];
              if (missing[j]) {
                (*out)[todo[received++]] =
                    absl::NotFoundError(absl::StrCat("no key '", key, "' on ", options_.target));
              } else {
                bytes_.fetch_add(items.data(j).size(), std::memory_order_relaxed);
                (*out)[todo[received++]] = MakeBlob(std::move(*items.mutable_data(j)));
              }
            }
          }
          if (!bad.ok()) context.TryCancel();
          absl::Status finished = FromGrpc(reader->Finish(), "stream");
          // Keep what arrived; a retry asks only for the rest.
          todo.erase(todo.begin(), todo.begin() + received);
          if (!bad.ok()) return bad;
          if (!finished.ok()) return finished;
          if (!todo.empty()) return TransitDamage("stream ended early");
          return absl::OkStatus();
        });
    if (!status.ok()) {
      for (size_t i : todo) (*out)[i] = status;
    }
  }

  Counters counters() const {
    Counters c;
    c.calls = calls_.load();
    c.retries = retries_.load();
    c.failures = failures_.load();
    c.bytes = bytes_.load();
    return c;
  }

  const Manifest& manifest() const { return manifest_; }

 private:
  double Jitter() {
    std::lock_guard<std::mutex> lock(rng_mu_);
    return std::uniform_real_distribution<double>(0.5, 1.5)(rng_);
  }

  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::DataService::Stub> stub_;
  Manifest manifest_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  std::atomic<uint64_t> calls_{0}, retries_{0}, failures_{0}, bytes_{0};
};

RemoteTier::RemoteTier(Options options) : options_(std::move(options)) {}
RemoteTier::~RemoteTier() = default;

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Connect(const Options& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("remote tier: empty target");
  if (options.max_attempts < 0 || options.max_batch_keys < 1 || options.max_message_bytes < 4096 ||
      options.chunk_bytes < 1024 ||
      options.chunk_bytes > static_cast<uint32_t>(options.max_message_bytes) - 1024) {
    return absl::InvalidArgumentError(
        "remote tier: need max_attempts >= 0, max_batch_keys >= 1, max_message_bytes >= 4096 and "
        "1024 <= chunk_bytes <= max_message_bytes - 1024");
  }
  Options checked = options;
  if (!options.token.empty()) {
    absl::StatusOr<std::string> token = NormalizeToken(options.token);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("remote tier: ", token.status().message()));
    }
    checked.token = *std::move(token);
  }
  std::unique_ptr<RemoteTier> tier(new RemoteTier(checked));
  tier->impl_ = std::make_unique<Impl>(tier->options_);
  GRADWIRE_RETURN_IF_ERROR(tier->impl_->FetchManifest());
  return tier;
}

const Manifest& RemoteTier::manifest() const { return impl_->manifest(); }

absl::StatusOr<Blob> RemoteTier::Get(absl::string_view key) { return impl_->Get(key); }

std::vector<absl::StatusOr<Blob>> RemoteTier::GetBatch(absl::Span<const std::string> keys) {
  return impl_->GetBatch(keys);
}

RemoteTier::Counters RemoteTier::counters() const { return impl_->counters(); }

}  // namespace cache
}  // namespace gradwire
