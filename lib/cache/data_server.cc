#include "gradwire/lib/cache/data_server.h"

#include <grpcpp/grpcpp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gradwire/lib/cache/checksum.h"
#include "gradwire/lib/cache/data_service.grpc.pb.h"

namespace gradwire {
namespace cache {

// Holds the grpc::Server (kept out of the header so users of DataServer do
// not need gRPC's headers).
class grpc_server_holder {
 public:
  std::unique_ptr<grpc::Server> server;
};

namespace {

constexpr char kTokenHeader[] = "x-gradwire-token";

bool Sha256(absl::string_view data, unsigned char out[EVP_MAX_MD_SIZE], unsigned int* len) {
  return EVP_Digest(data.data(), data.size(), out, len, EVP_sha256(), nullptr) == 1;
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
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
    if (!blob.ok()) return ToGrpc(blob.status());
    const std::string& data = **blob;
    uint64_t chunk = request->chunk_bytes() == 0 ? options_.default_chunk_bytes
                                                 : request->chunk_bytes();
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
    // link stays busy) before the whole batch is read.
    const size_t limit = std::min<size_t>(options_.default_chunk_bytes,
                                          static_cast<size_t>(options_.max_message_bytes) - 1024);
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
    for (const std::string& key : request->keys()) {
      absl::StatusOr<Blob> blob = source_->Get(key);
      if (!blob.ok() && !absl::IsNotFound(blob.status())) return ToGrpc(blob.status());
      size_t size = blob.ok() ? (*blob)->size() : 0;
      if (size + 64 > limit) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            absl::StrCat("'", key, "' is ", size,
                                         " bytes, over the batch message limit: fetch it with Get"));
      }
      if (items_bytes + size + 16 > limit) {
        if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        if (!flush()) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      if (blob.ok()) {
        checksum->Update(**blob);
        items.add_data(**blob);
      } else {
        items.add_not_found(static_cast<uint32_t>(items.data_size()));
        items.add_data();
      }
      items_bytes += size + 16;
    }
    if (!flush()) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    return grpc::Status::OK;
  }

 private:
  void EmulateDistance() const {
    if (options_.response_delay > absl::ZeroDuration()) absl::SleepFor(options_.response_delay);
  }

  grpc::Status Authorize(grpc::ServerContext* context) const {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kTokenHeader);
    if (it == metadata.end() ||
        !TokensEqual(absl::string_view(it->second.data(), it->second.size()), options_.token)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong token");
    }
    return grpc::Status::OK;
  }

  grpc::Status Check(grpc::ServerContext* context, uint64_t version) const {
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
};

DataServer::DataServer() = default;

DataServer::~DataServer() { Shutdown(absl::Seconds(1)); }

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(std::shared_ptr<DataSource> source,
                                                              const Options& options) {
  if (source == nullptr) return absl::InvalidArgumentError("data server: no source");
  if (options.token.empty()) {
    return absl::InvalidArgumentError("data server: a non-empty token is required");
  }
  if (options.max_message_bytes < 8192) {
    return absl::InvalidArgumentError("data server: max_message_bytes must be >= 8192");
  }
  std::unique_ptr<DataServer> server(new DataServer());
  server->service_ = std::make_unique<Service>(std::move(source), options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(server->service_.get());
  // gRPC's sync server starts with one poller and adds handler threads
  // lazily; prefetching clients keep dozens of calls in flight, so start
  // with enough pollers that calls do not queue behind each other.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 16);
  server->server_ = std::make_unique<grpc_server_holder>();
  server->server_->server = builder.BuildAndStart();
  if (server->server_->server == nullptr || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("data server: cannot listen on ", options.address));
  }
  return server;
}

void DataServer::Shutdown(absl::Duration grace) {
  if (server_ != nullptr && server_->server != nullptr) {
    server_->server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
}

void DataServer::Wait() {
  if (server_ != nullptr && server_->server != nullptr) server_->server->Wait();
}

}  // namespace cache
}  // namespace gradwire
