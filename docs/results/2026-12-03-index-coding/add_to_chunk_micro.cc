// Lab microbenchmark (2026-12-03-index-coding.md): SparseAverage's scalar scatter-add
// into a 4096-float chunk (as AddToChunk) against an AVX-512 gather/add/scatter, and the
// index scan alone; four payloads at 10 % of 25.6M elements.
//   g++ -O3 -march=x86-64-v2 -o add THIS_FILE && taskset -c 1 ./add
#include <immintrin.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <chrono>
#include <algorithm>
constexpr int kChunk = 4096;
__attribute__((noinline)) void Scalar(const uint32_t* idx, const float* v, uint64_t j, uint64_t stop, uint64_t c0, float* chunk) {
  for (; j < stop; ++j) chunk[idx[j] - c0] += v[j];
}
__attribute__((noinline, target("avx512f"))) void Scatter(const uint32_t* idx, const float* v, uint64_t j, uint64_t stop, uint64_t c0, float* chunk) {
  const __m512i base = _mm512_set1_epi32((int)c0);
  for (; j + 16 <= stop; j += 16) {
    __m512i i = _mm512_sub_epi32(_mm512_loadu_si512(idx + j), base);
    __m512 a = _mm512_i32gather_ps(i, chunk, 4);
    a = _mm512_add_ps(a, _mm512_loadu_ps(v + j));
    _mm512_i32scatter_ps(chunk, i, a, 4);
  }
  for (; j < stop; ++j) chunk[idx[j] - c0] += v[j];
}
int main() {
  const int P = 4; const uint64_t n = 25600000; const double dens = 0.1;
  std::mt19937 g(1);
  std::vector<std::vector<uint32_t>> I(P); std::vector<std::vector<float>> V(P);
  for (int r = 0; r < P; ++r) { for (uint64_t i = 0; i < n; ++i) if (std::uniform_real_distribution<>(0,1)(g) < dens) { I[r].push_back(i); V[r].push_back(1.0f + r); } }
  alignas(64) static float acc[kChunk];
  for (int mode = 0; mode < 3; ++mode) for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> b(P, 0);
    auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
      for (int r = 0; r < P; ++r) {
        uint64_t e = b[r]; while (e < I[r].size() && I[r][e] < c0 + kChunk) ++e;
        if (mode == 2) {} else if (mode == 0) Scalar(I[r].data(), V[r].data(), b[r], e, c0, acc); else Scatter(I[r].data(), V[r].data(), b[r], e, c0, acc);
        b[r] = e;
      }
      sum += acc[c0 % 4096]; std::memset(acc, 0, sizeof acc);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("%s %.2f ms (%g)\n", mode == 2 ? "none" : mode ? "scatter" : "scalar", ms, sum);
  }
}
