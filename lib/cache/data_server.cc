#include "gradwire/lib/cache/data_server.h"

#include <grpcpp/grpcpp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/data_service.grpc.pb.h"
#include "gradwire/lib/cache/token.h"

namespace gradwire {
namespace cache {

// Holds the grpc::Server (kept out of the header so users of DataServer do
// not need gRPC's headers).
class grpc_server_holder {
 public:
  std::unique_ptr<TcpListener> listener;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
  std::unique_ptr<grpc::Server> server;
};

namespace {

constexpr char kTokenHeader[] = "x-gradwire-token";

bool Sha256(absl::string_view data, unsigned char out[EVP_MAX_MD_SIZE], unsigned int* len) {
  return EVP_Digest(data.data(), data.size(), out, len, EVP_sha256(), nullptr) == 1;
}

int Milliseconds(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
}

}  // namespace

bool TokensEqual(absl::string_view a, absl::string_view b) {
  unsigned char da[EVP_MAX_MD_SIZE], db[EVP_MAX_MD_SIZE];
  unsigned int la = 0, lb = 0;
  if (!Sha256(a, da, &la) || !Sha256(b, db, &lb) || la != lb) return false;
  return CRYPTO_memcmp(da, db, la) == 0;
}

class DataServer::Service final : public proto::DataService::Service {
 public:
  Service(std::shared_ptr<DataSource> source, const Options& options)
      : source_(std::move(source)),
        options_(options),
        manifest_text_(source_->manifest().Serialize()),
        version_(source_->manifest().version()) {}

  DataServer::Stats stats() const {
    DataServer::Stats st;
    st.calls = calls_.load(std::memory_order_relaxed);
    st.unauthenticated = unauthenticated_.load(std::memory_order_relaxed);
    st.objects = objects_.load(std::memory_order_relaxed);
    st.bytes = bytes_.load(std::memory_order_relaxed);
    st.not_found = not_found_.load(std::memory_order_relaxed);
    st.source_errors = source_errors_.load(std::memory_order_relaxed);
    return st;
  }

  grpc::Status GetManifest(grpc::ServerContext* context, const proto::GetManifestRequest*,
                           proto::GetManifestReply* reply) override {
    grpc::Status auth = Authorize(context);
    if (!auth.ok()) return auth;
    EmulateDistance();
    reply->set_manifest(manifest_text_);
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext* context, const proto::GetRequest* request,
                   grpc::ServerWriter<proto::Chunk>* writer) override {
    grpc::Status ok = Check(context, request->dataset_version());
    if (!ok.ok()) return ok;
    EmulateDistance();
    absl::StatusOr<Blob> blob = source_->Get(request->key());
    if (!blob.ok()) return SourceError(blob.status());
    const std::string& data = **blob;
    uint64_t chunk =
        request->chunk_bytes() == 0 ? options_.default_chunk_bytes : request->chunk_bytes();
    chunk = std::min<uint64_t>(std::max<uint64_t>(chunk, 1024),
                               static_cast<uint64_t>(options_.max_message_bytes) - 1024);
    const uint64_t checksum = Checksum64(data);
    uint64_t offset = 0;
    do {
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      proto::Chunk c;
      uint64_t n = std::min<uint64_t>(chunk, data.size() - offset);
      c.set_total_bytes(data.size());
      c.set_offset(offset);
      c.set_checksum(checksum);
      c.set_data(data.data() + offset, n);
      if (!writer->Write(c)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      offset += n;
    } while (offset < data.size());
    objects_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(data.size(), std::memory_order_relaxed);
    return grpc::Status::OK;
  }

  grpc::Status GetBatch(grpc::ServerContext* context, const proto::GetBatchRequest* request,
                        grpc::ServerWriter<proto::Items>* writer) override {
    grpc::Status ok = Check(context, request->dataset_version());
    if (!ok.ok()) return ok;
    if (request->keys_size() > options_.max_batch_keys) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("batch of ", request->keys_size(), " keys exceeds the ",
                                       options_.max_batch_keys, " allowed"));
    }
    EmulateDistance();
    // Messages of up to one chunk, so the client starts receiving (and the
    // link stays busy) before the whole batch is read, and never more than
    // either side accepts.
    size_t limit = std::min<size_t>(options_.default_chunk_bytes,
                                    static_cast<size_t>(options_.max_message_bytes) - 1024);
    if (request->max_message_bytes() > 0) {
      limit = std::min<size_t>(limit, std::max<size_t>(request->max_message_bytes(), 2048) - 1024);
    }
    uint64_t served = 0, served_bytes = 0, missing = 0;
    proto::Items items;
    size_t items_bytes = 0;
    auto checksum = std::make_unique<Checksum64Stream>();
    auto flush = [&]() -> bool {
      if (items.data_size() == 0) return true;
      items.set_checksum(checksum->Digest());
      bool written = writer->Write(items);
      items.Clear();
      items_bytes = 0;
      checksum = std::make_unique<Checksum64Stream>();
      return written;
    };
    // Cancellation is checked per message, not per key: IsCancelled takes
    // a lock inside gRPC (an absl::Mutex with deadlock detection in
    // Debian's build), which per 785-byte sample cost more than the read.
    auto count = [&] {
      objects_.fetch_add(served, std::memory_order_relaxed);
      bytes_.fetch_add(served_bytes, std::memory_order_relaxed);
      not_found_.fetch_add(missing, std::memory_order_relaxed);
    };
    for (int i = 0; i < request->keys_size(); ++i) {
      absl::StatusOr<Blob> blob = source_->Get(request->keys(i));
      if (!blob.ok() && !absl::IsNotFound(blob.status())) {
        count();
        return SourceError(blob.status());
      }
      size_t size = blob.ok() ? (*blob)->size() : 0;
      if (size + 64 > limit) {
        count();
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("object ", i, " of the batch is ", size,
                         " bytes, over the batch message limit: fetch it with Get"));
      }
      if (items_bytes + size + 16 > limit) {
        if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        if (!flush()) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      if (blob.ok()) {
        checksum->Update(**blob);
        items.add_data(**blob);
        ++served;
        served_bytes += size;
      } else {
        items.add_not_found(static_cast<uint32_t>(items.data_size()));
        items.add_data();
        ++missing;
      }
      items_bytes += size + 16;
    }
    bool flushed = flush();
    count();
    if (!flushed) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    return grpc::Status::OK;
  }

 private:
  void EmulateDistance() const {
    if (options_.response_delay > absl::ZeroDuration()) absl::SleepFor(options_.response_delay);
  }

  grpc::Status Authorize(grpc::ServerContext* context) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kTokenHeader);
    if (it == metadata.end() ||
        !TokensEqual(absl::string_view(it->second.data(), it->second.size()), options_.token)) {
      unauthenticated_.fetch_add(1, std::memory_order_relaxed);
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token");
    }
    calls_.fetch_add(1, std::memory_order_relaxed);
    return grpc::Status::OK;
  }

  // The source's error as the client sees it: the code, and words that
  // name neither the key (the client has it) nor anything of this host
  // (paths, file names). The full error goes to this process's stderr.
  grpc::Status SourceError(const absl::Status& s) {
    if (absl::IsNotFound(s)) {
      not_found_.fetch_add(1, std::memory_order_relaxed);
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such object");
    }
    source_errors_.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "data server: reading the source failed: %s\n", s.ToString().c_str());
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                        absl::IsDataLoss(s) ? "the server's copy of the object is damaged"
                                            : "the server could not read the object");
  }

  grpc::Status Check(grpc::ServerContext* context, uint64_t version) {
    grpc::Status auth = Authorize(context);
    if (!auth.ok()) return auth;
    if (version != version_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("client pinned dataset version ", ChecksumToHex(version),
                                       ", this server serves ", ChecksumToHex(version_)));
    }
    return grpc::Status::OK;
  }

  const std::shared_ptr<DataSource> source_;
  const Options options_;
  const std::string manifest_text_;
  const uint64_t version_;
  std::atomic<uint64_t> calls_{0}, unauthenticated_{0}, objects_{0}, bytes_{0}, not_found_{0},
      source_errors_{0};
};

DataServer::DataServer() = default;

DataServer::~DataServer() { Shutdown(absl::Seconds(1)); }

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(std::shared_ptr<DataSource> source,
                                                              const Options& options) {
  if (source == nullptr) return absl::InvalidArgumentError("data server: no source");
  Options checked = options;
  absl::StatusOr<std::string> token = NormalizeToken(options.token);
  if (!token.ok())
    return absl::InvalidArgumentError(absl::StrCat("data server: ", token.status().message()));
  checked.token = *std::move(token);
  if (options.max_message_bytes < 8192) {
    return absl::InvalidArgumentError("data server: max_message_bytes must be >= 8192");
  }
  if (options.max_threads < 32 || options.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError(
        "data server: need max_threads >= 32 and max_concurrent_streams >= 1");
  }
  std::unique_ptr<DataServer> server(new DataServer());
  server->server_ = std::make_unique<grpc_server_holder>();
  grpc_server_holder& holder = *server->server_;
  TcpListener::Options lo;
  lo.address = options.address;
  lo.max_connections = options.max_connections;
  absl::StatusOr<std::unique_ptr<TcpListener>> listener = TcpListener::Listen(lo);
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat("data server: ", listener.status().message()));
  }
  holder.listener = *std::move(listener);
  server->port_ = holder.listener->port();

  server->service_ = std::make_unique<Service>(std::move(source), checked);
  grpc::ServerBuilder builder;
  // No gRPC listening port: connections arrive from holder.listener.
  holder.acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             Milliseconds(options.handshake_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             Milliseconds(options.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Milliseconds(options.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  grpc::ResourceQuota quota("gradwire-data-server");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(server->service_.get());
  // gRPC's sync server starts with one poller and adds handler threads
  // lazily; prefetching clients keep dozens of calls in flight, so start
  // with enough pollers that calls do not queue behind each other.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 16);
  holder.server = builder.BuildAndStart();
  if (holder.server == nullptr || holder.acceptor == nullptr) {
    return absl::UnavailableError(absl::StrCat("data server: cannot start on ", options.address));
  }
  grpc::experimental::ExternalConnectionAcceptor* acceptor = holder.acceptor.get();
  const int listen_fd = holder.listener->fd();
  holder.listener->Start([acceptor, listen_fd](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = listen_fd;
    p.fd = fd;
    acceptor->HandleNewConnection(&p);
  });
  return server;
}

DataServer::Stats DataServer::stats() const {
  Stats s = service_ != nullptr ? service_->stats() : Stats();
  if (server_ != nullptr && server_->listener != nullptr) {
    s.connections = server_->listener->counters();
  }
  return s;
}

void DataServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  if (server_->listener != nullptr) server_->listener->Stop();
  if (server_->server != nullptr) {
    server_->server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
}

void DataServer::Wait() {
  if (server_ != nullptr && server_->server != nullptr) server_->server->Wait();
}

std::string FormatServerStats(const DataServer::Stats& s) {
  return absl::StrFormat(
      "served %d objects (%d bytes) in %d calls; %d not found, %d source errors, %d calls refused "
      "for their token; connections: %d accepted, %d shed, %d accept errors, %d open",
      s.objects, s.bytes, s.calls, s.not_found, s.source_errors, s.unauthenticated,
      s.connections.accepted, s.connections.shed, s.connections.accept_errors, s.connections.open);
}

}  // namespace cache
}  // namespace gradwire
