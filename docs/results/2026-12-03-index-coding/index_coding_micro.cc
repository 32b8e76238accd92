// Lab microbenchmark (2026-12-03-index-coding.md): EncodeIndices and DecodeIndices
// (delta-varint) of 25.6M elements at a density (argv[1]), warm buffers, wall ns an index.
// From the repository root, with /tmp/inc/gradwire a link to it:
//   g++ -std=c++17 -O2 -I/tmp/inc -o dec THIS_FILE lib/codec/index_coding.cc base/coding.cc \
//       -labsl_statusor -labsl_status -labsl_strings -labsl_cord -labsl_str_format_internal
//   taskset -c 0 ./dec 0.01
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "gradwire/lib/codec/wire_format.h"
using namespace gradwire;
int main(int argc, char** argv) {
  const uint64_t n = 25600000; const double dens = argc > 1 ? atof(argv[1]) : 0.1;
  std::mt19937 g(1); std::vector<uint32_t> idx;
  for (uint64_t i = 0; i < n; ++i) if (std::uniform_real_distribution<>(0,1)(g) < dens) idx.push_back(i);
  std::vector<uint8_t> buf(MaxIndexBytes(IndexEncoding::kDeltaVarint, idx.size()));
  size_t bytes = *EncodeIndices(IndexEncoding::kDeltaVarint, idx, absl::MakeSpan(buf));
  buf.resize(bytes);
  std::vector<uint32_t> out(idx.size());
  for (int rep = 0; rep < (getenv("REPS") ? 300 : 3); ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    size_t b2 = *EncodeIndices(IndexEncoding::kDeltaVarint, idx, absl::MakeSpan(buf.data(), buf.size()));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("encode %.2f ms = %.2f ns/index (%zu)\n", ms, ms * 1e6 / idx.size(), b2);
  }
  for (int rep = 0; rep < (getenv("REPS") ? 300 : 5); ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    absl::Status s = DecodeIndices(IndexEncoding::kDeltaVarint, buf, n, absl::MakeSpan(out));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("k=%zu bytes=%zu decode %.2f ms = %.2f ns/index ok=%d\n", idx.size(), bytes, ms, ms * 1e6 / idx.size(), s.ok() && out == idx);
  }
}
