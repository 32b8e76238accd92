#include "gradwire/lib/comm/exchange_stats.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gradwire {

void ExchangeStats::Add(const ExchangeStats& other) {
  dense_buckets += other.dense_buckets;
  compressed_buckets += other.compressed_buckets;
  sparse_allreduce_buckets += other.sparse_allreduce_buckets;
  cast_allreduce_buckets += other.cast_allreduce_buckets;
  elements += other.elements;
  nonfinite += other.nonfinite;
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  intra_node_bytes_sent += other.intra_node_bytes_sent;
  intra_node_bytes_received += other.intra_node_bytes_received;
  compress_time += other.compress_time;
  auth_time += other.auth_time;
  wire_time += other.wire_time;
  sync_time += other.sync_time;
  wait_time += other.wait_time;
  copy_time += other.copy_time;
  span_time += other.span_time;
}

void ExchangeStats::AddCall(const transport::CallStats& call) {
  bytes_sent += call.bytes_sent;
  bytes_received += call.bytes_received;
  wire_time += call.wire_time;
  sync_time += call.agree_time;
}

double ExchangeStats::OverlapFraction() const {
  const double cpu = absl::ToDoubleSeconds(cpu_time());
  const double wire = absl::ToDoubleSeconds(wire_time);
  const double span = absl::ToDoubleSeconds(span_time);
  const double shorter = std::min(cpu, wire);
  if (span <= 0 || shorter <= 0) return 0;
  return std::clamp((cpu + wire - span) / shorter, 0.0, 1.0);
}

std::string ExchangeStats::ToString() const {
  std::string out = absl::StrFormat(
      "%d buckets (%d dense, %d compressed), %d elements: sent %d B (%d B intra-node), "
      "received %d B (%d B intra-node); compress %.3f ms, auth %.3f ms, wire %.3f ms "
      "(sync %.3f ms), wait %.3f ms",
      dense_buckets + compressed_buckets, dense_buckets, compressed_buckets, elements, bytes_sent,
      intra_node_bytes_sent, bytes_received, intra_node_bytes_received,
      absl::ToDoubleMilliseconds(compress_time), absl::ToDoubleMilliseconds(auth_time),
      absl::ToDoubleMilliseconds(wire_time), absl::ToDoubleMilliseconds(sync_time),
      absl::ToDoubleMilliseconds(wait_time));
  if (sparse_allreduce_buckets > 0) {
    absl::StrAppendFormat(&out, "; %d by sparse allreduce", sparse_allreduce_buckets);
  }
  if (cast_allreduce_buckets > 0) {
    absl::StrAppendFormat(&out, "; %d by cast allreduce", cast_allreduce_buckets);
  }
  if (span_time > absl::ZeroDuration()) {
    absl::StrAppendFormat(&out, "; copy %.3f ms, span %.3f ms, overlap %.0f%%",
                          absl::ToDoubleMilliseconds(copy_time),
                          absl::ToDoubleMilliseconds(span_time), 100 * OverlapFraction());
  }
  return out;
}

}  // namespace gradwire
