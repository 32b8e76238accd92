// DecodeIndices (delta varint) alone: ns an index at densities 0.1, 1 and
// 10 % of 25.6M elements (Bernoulli picks, seed 1), median of 101 decodes.
// Built twice, against lib/codec/wire_format.cc before and after d614140,
// from the repository root with include/gradwire -> the repository:
//   g++ -std=c++17 -O2 -march=x86-64-v2 -Iinclude base/*.cc lib/codec/wire_format.cc \
//     varint_decode_bench.cc -labsl_statusor -labsl_status -labsl_strings \
//     -labsl_str_format_internal -labsl_cord -labsl_int128 -labsl_raw_logging_internal \
//     -labsl_throw_delegate -lxxhash -o bench
//   taskset -c 1 ./bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "gradwire/lib/codec/wire_format.h"
using namespace gradwire;
int main(int argc, char** argv) {
  for (double density : {0.001, 0.01, 0.1}) {
    std::mt19937_64 rng(1);
    std::bernoulli_distribution pick(density);
    const uint64_t n = 25600000;
    std::vector<uint32_t> idx;
    for (uint64_t i = 0; i < n; ++i) if (pick(rng)) idx.push_back(i);
    std::vector<uint8_t> enc(MaxIndexBytes(IndexEncoding::kDeltaVarint, idx.size()));
    auto w = EncodeIndices(IndexEncoding::kDeltaVarint, idx, absl::MakeSpan(enc));
    enc.resize(*w);
    std::vector<uint32_t> out(idx.size());
    std::vector<double> t;
    for (int rep = 0; rep < 101; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      auto s = DecodeIndices(IndexEncoding::kDeltaVarint, enc, n, absl::MakeSpan(out));
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!s.ok() || out != idx) { std::printf("BAD\n"); return 1; }
    }
    std::sort(t.begin(), t.end());
    std::printf("density %.3f: %zu indices, %.2f ns/index (median of 101)\n", density, idx.size(), t[50] / idx.size() * 1e9);
  }
}
