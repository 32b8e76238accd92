// _gradwire_data: the second Python extension, the data cache (lib/cache/
// for Python): DataCache over a packed directory or a data server, a
// prefetching reader over a given key order, the shuffled epoch order, and
// the packer. A module of its own because lib/cache's remote tier links
// gRPC, which the core extension (_gradwire: codecs, communicator, DDP
// hook support) must not load into a training process; gradwire.data
// loads this one when it is imported.
// Kept thin: lib/cache's headers are the contract; this only converts
// types, releases the GIL around I/O and turns Status into exceptions
// (status_exception.h; gradwire.Error is the core's).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bound_method.h"
#include "gradwire/lib/cache/cache_stats.h"
#include "gradwire/lib/cache/cache_tier.h"
#include "gradwire/lib/cache/data_cache.h"
#include "gradwire/lib/cache/dataset_packer.h"
#include "gradwire/lib/cache/directory_source.h"
#include "gradwire/lib/cache/epoch_order.h"
#include "gradwire/lib/cache/manifest.h"
#include "gradwire/lib/cache/prefetcher.h"
#include "gradwire/lib/cache/remote_tier.h"
#include "gradwire/lib/cache/token.h"
#include "status_exception.h"

namespace py = pybind11;
using pybind11::literals::operator""_a;  // py::dict("key"_a = value, ...)

namespace gradwire {
namespace python {
namespace {

using cache::Blob;

// Copies fixed-size records into one bytes object (n x record size), so a
// batch crosses into Python as a single buffer numpy can view.
py::bytes Concatenate(const std::vector<Blob>& blobs) {
  if (blobs.empty()) return py::bytes();
  const size_t each = blobs[0]->size();
  for (const Blob& b : blobs) {
    if (b->size() != each) {
      throw py::value_error(absl::StrCat("records differ in size (", each, " and ", b->size(),
                                         " bytes); read them one by one with get()"));
    }
  }
  PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(each * blobs.size()));
  if (out == nullptr) throw py::error_already_set();
  char* dst = PyBytes_AS_STRING(out);
  for (const Blob& b : blobs) {
    std::memcpy(dst, b->data(), each);
    dst += each;
  }
  return py::reinterpret_steal<py::bytes>(out);
}

py::dict TierDict(const cache::TierStats& t) {
  return py::dict("hits"_a = t.hits, "misses"_a = t.misses, "hit_bytes"_a = t.hit_bytes,
                  "inserts"_a = t.inserts, "rejected_full"_a = t.rejected_full,
                  "rejected_too_big"_a = t.rejected_too_big, "write_errors"_a = t.write_errors,
                  "write_dropped"_a = t.write_dropped, "corrupt"_a = t.corrupt,
                  "used_bytes"_a = t.used_bytes, "budget_bytes"_a = t.budget_bytes,
                  "warm_seconds"_a = t.warm_seconds);
}

py::dict EpochDict(const cache::EpochStats& e) {
  return py::dict("epoch"_a = e.epoch, "reads"_a = e.reads, "read_bytes"_a = e.read_bytes,
                  "memory"_a = TierDict(e.memory), "disk"_a = TierDict(e.disk),
                  "source_reads"_a = e.remote_reads, "source_bytes"_a = e.remote_bytes,
                  "source_errors"_a = e.remote_errors, "stall_s"_a = e.stall_seconds,
                  "wall_s"_a = e.wall_seconds, "cache_hit_rate"_a = e.cache_hit_rate());
}

// A prefetching reader of `keys` in the given order (Prefetcher). Holds
// the cache, so the cache outlives it whatever Python frees first.
class PyPrefetcher {
 public:
  PyPrefetcher(std::shared_ptr<cache::DataCache> cache, std::vector<std::string> keys,
               const cache::Prefetcher::Options& options)
      : cache_(std::move(cache)) {
    prefetcher_ = std::make_unique<cache::Prefetcher>(cache_.get(), std::move(keys), options);
  }
  ~PyPrefetcher() { Shutdown(); }

  size_t size() const { return prefetcher_->size(); }
  size_t position() const { return position_; }
  size_t depth() const { return prefetcher_->depth(); }

  py::bytes Next() {
    std::vector<Blob> got = Take(1);
    if (got.empty()) throw py::stop_iteration();
    return py::bytes(got[0]->data(), got[0]->size());
  }

  // The next n objects (fewer at the end; empty bytes when done), joined.
  py::bytes NextBatch(size_t n) { return Concatenate(Take(n)); }

  void Shutdown() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    prefetcher_->Shutdown();
  }

 private:
  std::vector<Blob> Take(size_t n) {
    std::vector<Blob> out;
    absl::Status error;
    {
      py::gil_scoped_release release;
      // Prefetcher::Next is for one reader thread at a time.
      std::lock_guard<std::mutex> lock(mu_);
      while (out.size() < n && position_ < prefetcher_->size()) {
        absl::StatusOr<Blob> blob = prefetcher_->Next();
        if (!blob.ok()) {
          error = blob.status();
          break;
        }
        ++position_;
        out.push_back(*std::move(blob));
      }
    }
    if (!error.ok()) Raise(error);
    return out;
  }

  std::shared_ptr<cache::DataCache> cache_;
  std::mutex mu_;
  std::unique_ptr<cache::Prefetcher> prefetcher_;
  size_t position_ = 0;
};

class PyDataCache {
 public:
  PyDataCache(const std::optional<std::string>& path, const std::optional<std::string>& remote,
              const std::optional<std::string>& token, const std::optional<std::string>& token_file,
              uint64_t memory_budget_bytes, const std::string& memory_policy,
              const std::string& disk_dir, uint64_t disk_budget_bytes,
              const std::string& disk_policy, bool disk_sync, bool verify_shards,
              double read_timeout_s) {
    // A NUL would cut a path short, and another file would be opened.
    for (const std::optional<std::string>* p : {&path, &token_file}) {
      if (p->has_value() && (*p)->find('\0') != std::string::npos) {
        throw py::value_error("a path holds a NUL byte");
      }
    }
    if (disk_dir.find('\0') != std::string::npos) {
      throw py::value_error("disk_dir holds a NUL byte");
    }
    if (!(read_timeout_s >= 0) || read_timeout_s > 86400) {
      throw py::value_error(absl::StrCat(
          "read_timeout_s must be in [0, 86400] (0: the default), got ", read_timeout_s));
    }
    if (path.has_value() == remote.has_value()) {
      throw py::value_error(
          "give exactly one of path (a packed directory) or remote ('host:port')");
    }
    if (token.has_value() && token_file.has_value()) {
      throw py::value_error("give token or token_file, not both");
    }
    cache::DataCache::Options options;
    options.memory_budget_bytes = memory_budget_bytes;
    options.memory_policy = Value(cache::ParseEvictionPolicy(memory_policy));
    options.disk_dir = disk_dir;
    options.disk_budget_bytes = disk_budget_bytes;
    options.disk_policy = Value(cache::ParseEvictionPolicy(disk_policy));
    options.disk_sync = disk_sync;
    if (!disk_dir.empty() && disk_budget_bytes == 0) {
      throw py::value_error("disk_dir needs a disk_budget_bytes > 0");
    }
    absl::Status error;
    {
      py::gil_scoped_release release;
      std::shared_ptr<cache::DataSource> source;
      if (path.has_value()) {
        cache::DirectorySource::Options so;
        so.verify_shards = verify_shards;
        auto dir = cache::DirectorySource::Open(*path, so);
        if (dir.ok()) source = std::move(*dir);
        error = dir.status();
      } else {
        cache::RemoteTier::Options ro;
        ro.target = *remote;
        // The server's rule for its token file (lib/cache/token.h); a
        // token given directly is normalized the same way by Connect.
        absl::StatusOr<std::string> loaded =
            token_file.has_value() ? cache::ReadTokenFile(*token_file) : token.value_or("");
        if (read_timeout_s > 0) ro.read_timeout = absl::Seconds(read_timeout_s);
        error = loaded.status();
        if (error.ok()) {
          ro.token = *std::move(loaded);
          auto tier = cache::RemoteTier::Connect(ro);
          if (tier.ok()) source = std::move(*tier);
          error = tier.status();
        }
      }
      if (error.ok()) {
        auto created = cache::DataCache::Create(std::move(source), options);
        if (created.ok()) cache_ = std::move(*created);
        error = created.status();
      }
    }
    if (!error.ok()) Raise(error);
  }

  std::string DatasetId() const { return cache_->manifest().dataset_id(); }
  std::string Version() const {
    return absl::StrCat(absl::Hex(cache_->manifest().version(), absl::kZeroPad16));
  }
  std::string Source() const { return cache_->source()->Describe(); }
  std::vector<std::string> Keys(const std::string& split) const {
    return cache_->manifest().SampleKeys(split);
  }
  uint64_t NumSamples(const std::string& split) const {
    if (split.empty()) return cache_->manifest().num_samples();
    uint64_t n = 0;
    for (const auto& s : cache_->manifest().shards()) {
      if (s.split == split) n += s.count;
    }
    return n;
  }
  std::vector<std::string> Splits() const {
    std::vector<std::string> out;
    for (const auto& s : cache_->manifest().shards()) {
      if (std::find(out.begin(), out.end(), s.split) == out.end()) out.push_back(s.split);
    }
    return out;
  }

  py::bytes Get(const std::string& key) {
    absl::StatusOr<Blob> blob;
    {
      py::gil_scoped_release release;
      blob = cache_->Get(key);
    }
    Blob b = Value(std::move(blob));
    return py::bytes(b->data(), b->size());
  }

  // Samples split/index for each index, fetched as one batch (misses go
  // to the source in one call), joined into one bytes object.
  py::bytes Read(const std::string& split, const std::vector<uint64_t>& indices) {
    std::vector<std::string> keys;
    keys.reserve(indices.size());
    for (uint64_t i : indices) keys.push_back(cache::Manifest::SampleKey(split, i));
    std::vector<absl::StatusOr<Blob>> got;
    {
      py::gil_scoped_release release;
      got = cache_->Fetch(keys);
    }
    std::vector<Blob> blobs;
    blobs.reserve(got.size());
    for (const absl::StatusOr<Blob>& g : got) {
      if (!g.ok()) Raise(g.status());
      blobs.push_back(*g);
    }
    return Concatenate(blobs);
  }

  std::unique_ptr<PyPrefetcher> Prefetch(std::vector<std::string> keys, size_t depth, int threads) {
    if (threads < 1 || threads > 256) {
      throw py::value_error(absl::StrCat("threads must be in 1..256, got ", threads));
    }
    cache::Prefetcher::Options options;
    options.depth = depth;
    options.threads = threads;
    return std::make_unique<PyPrefetcher>(cache_, std::move(keys), options);
  }

  void BeginEpoch(int epoch) { cache_->BeginEpoch(epoch); }
  void EndEpoch() { cache_->EndEpoch(); }
  py::list Stats() const {
    py::list out;
    for (const cache::EpochStats& e : cache_->Stats()) out.append(EpochDict(e));
    return out;
  }
  std::string FormatStats() const { return cache_->FormatStats(); }
  void FlushDiskWrites(double timeout_s) {
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = cache_->FlushDiskWrites(absl::Seconds(timeout_s));
    }
    if (!s.ok()) Raise(s);
  }

 private:
  std::shared_ptr<cache::DataCache> cache_;
};

// Adds DataCache, Prefetcher, epoch_order and pack_dataset to `m`.
void DefineDataCache(py::module_& m) {
  py::class_<PyPrefetcher>(m, "Prefetcher", R"doc(
Reads keys in the order given, ahead of the reader, through a DataCache
(lib/cache/prefetcher.h). Iterating yields each object's bytes; next_batch(n)
returns the next n fixed-size objects joined. Made by DataCache.prefetch().)doc")
      .def("__len__", python::Bound(&PyPrefetcher::size))
      .def_property_readonly("position", python::Bound(&PyPrefetcher::position))
      .def_property_readonly("depth", python::Bound(&PyPrefetcher::depth))
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", python::Bound(&PyPrefetcher::Next))
      .def("next_batch", python::Bound(&PyPrefetcher::NextBatch), py::arg("n"),
           "The next n objects (fewer at the end, b'' when done) as one bytes object.")
      .def("shutdown", python::Bound(&PyPrefetcher::Shutdown), "Stops the workers; idempotent.");

  py::class_<PyDataCache>(m, "DataCache", R"doc(
A packed dataset read through gradwire's cache: memory tier -> disk tier ->
source (lib/cache/data_cache.h). The source is a packed directory (path=)
or a data server (remote='host:port', with token= or token_file=, read
like the server's: surrounding whitespace stripped, printable ASCII only,
ValueError otherwise). memory_budget_bytes=0 or
disk_dir='' leave that tier out. Samples are keyed '<split>/<index>'.
Reads release the GIL. Errors: ValueError (bad argument),
FileNotFoundError (no dataset / no such key), OSError (damaged data,
source unreachable), gradwire.Error (other).)doc")
      .def(py::init<const std::optional<std::string>&, const std::optional<std::string>&,
                    const std::optional<std::string>&, const std::optional<std::string>&, uint64_t,
                    const std::string&, const std::string&, uint64_t, const std::string&, bool,
                    bool, double>(),
           py::arg("path") = py::none(), py::arg("remote") = py::none(),
           py::arg("token") = py::none(), py::arg("token_file") = py::none(),
           py::arg("memory_budget_bytes") = 0, py::arg("memory_policy") = "fill_once",
           py::arg("disk_dir") = "", py::arg("disk_budget_bytes") = 0,
           py::arg("disk_policy") = "fill_once", py::arg("disk_sync") = true,
           py::arg("verify_shards") = false, py::arg("read_timeout_s") = 0.0)
      .def_property_readonly("dataset_id", python::Bound(&PyDataCache::DatasetId))
      .def_property_readonly("version", python::Bound(&PyDataCache::Version),
                             "The manifest version (hex).")
      .def_property_readonly("source", python::Bound(&PyDataCache::Source))
      .def("splits", python::Bound(&PyDataCache::Splits))
      .def("keys", python::Bound(&PyDataCache::Keys), py::arg("split") = "",
           "Sample keys of split (all if ''), in index order.")
      .def("num_samples", python::Bound(&PyDataCache::NumSamples), py::arg("split") = "")
      .def("get", python::Bound(&PyDataCache::Get), py::arg("key"),
           "One object's bytes ('train/7', or a shard).")
      .def("read", python::Bound(&PyDataCache::Read), py::arg("split"), py::arg("indices"),
           "Samples split/i for i in indices, fetched as one batch, joined (equal sizes).")
      .def("prefetch", python::Bound(&PyDataCache::Prefetch), py::arg("keys"), py::arg("depth") = 0,
           py::arg("threads") = 2, "A Prefetcher over keys, in that order.")
      .def("begin_epoch", python::Bound(&PyDataCache::BeginEpoch), py::arg("epoch"),
           "Starts a statistics epoch (ends the previous one).")
      .def("end_epoch", python::Bound(&PyDataCache::EndEpoch))
      .def("stats", python::Bound(&PyDataCache::Stats),
           "Per-epoch statistics: a list of dicts (reads, memory/disk tier hits, "
           "source_reads/source_bytes, stall_s, ...).")
      .def("format_stats", python::Bound(&PyDataCache::FormatStats))
      .def("flush_disk_writes", python::Bound(&PyDataCache::FlushDiskWrites),
           py::arg("timeout_s") = 30.0);

  m.def(
      "epoch_order",
      [](const std::vector<std::string>& keys, uint64_t seed, uint64_t epoch, int rank, int world,
         bool sticky) {
        return Value(sticky ? cache::StickyEpochOrder(keys, seed, epoch, rank, world)
                            : cache::EpochOrder(keys, seed, epoch, rank, world));
      },
      py::arg("keys"), py::arg("seed"), py::arg("epoch"), py::arg("rank"), py::arg("world"),
      py::arg("sticky") = false,
      "This rank's share of the shuffled epoch (lib/cache/epoch_order.h); sticky: the same "
      "shard every epoch, reshuffled within (what a rank's own tiers can hold).");

  m.def(
      "pack_dataset",
      [](const std::string& out_dir, const std::string& dataset_id,
         const std::vector<std::pair<std::string, std::vector<std::string>>>& splits,
         size_t samples_per_shard) {
        if (samples_per_shard == 0) throw py::value_error("samples_per_shard must be > 0");
        std::vector<cache::SplitRecords> records;
        for (const auto& [split, recs] : splits) records.push_back({split, recs});
        absl::StatusOr<cache::Manifest> manifest;
        {
          py::gil_scoped_release release;
          manifest = cache::PackDataset(out_dir, dataset_id, records, samples_per_shard);
        }
        const cache::Manifest m = Value(std::move(manifest));
        return py::dict("dataset_id"_a = m.dataset_id(),
                        "version"_a = absl::StrCat(absl::Hex(m.version(), absl::kZeroPad16)),
                        "shards"_a = m.shards().size(), "samples"_a = m.num_samples(),
                        "bytes"_a = m.total_bytes());
      },
      py::arg("out_dir"), py::arg("dataset_id"), py::arg("splits"),
      py::arg("samples_per_shard") = 5000,
      "Packs [(split, [record bytes, ...]), ...] into shards + MANIFEST in out_dir "
      "(lib/cache/dataset_packer.h). Returns a summary dict.");
}

}  // namespace
}  // namespace python
}  // namespace gradwire

PYBIND11_MODULE(_gradwire_data, m) {
  m.doc() = "gradwire's data cache (C++ core; see gradwire.data)";
  gradwire::python::UseCoreErrorType(m);
  gradwire::python::DefineDataCache(m);
}
