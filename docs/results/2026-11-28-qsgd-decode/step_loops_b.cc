// The same loops templated over the format (0 fp32, 1 fp16, 2 bf16) and the step; a second
// build. g++ -O2 -mavx2 -mf16c -std=c++17
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <random>
#include <vector>
static std::vector<uint8_t> junk(64 << 20, 1);
static void Evict() { volatile uint64_t s = 0; for (size_t i = 0; i < junk.size(); i += 64) s += junk[i]; }
// F: 0 fp32, 1 fp16, 2 bf16
template <int F> static inline __m256 Load8(const uint8_t* p) {
  if (F == 0) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if (F == 1) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
template <int F, int W> __attribute__((noinline)) void Avg(const uint8_t* const* v, uint64_t frames, uint64_t n, float* out) {
  constexpr int kW = F == 0 ? 4 : 2;
  const __m256 by = _mm256_set1_ps(0.25f);
  for (uint64_t i = 0; i + 8 * W <= n; i += 8 * W) {
    __m256 s[W];
    for (int w = 0; w < W; ++w) s[w] = _mm256_setzero_ps();
    for (uint64_t r = 0; r < frames; ++r)
      for (int w = 0; w < W; ++w) s[w] = _mm256_add_ps(s[w], Load8<F>(v[r] + kW * (i + 8 * w)));
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + i + 8 * w, _mm256_mul_ps(s[w], by));
  }
}
template <int F> void Run(uint64_t n) {
  constexpr int kW = F == 0 ? 4 : 2;
  bool cold = n > 65536; int reps = n > 5000000 ? 7 : cold ? 31 : 501;
  std::vector<std::vector<uint8_t>> f(4, std::vector<uint8_t>(kW * n));
  std::mt19937 rng(1);
  for (auto& x : f) for (size_t i = 0; i < x.size(); i += 2) { uint16_t h = 0x3000 | (rng() & 0x7ff); memcpy(&x[i], &h, 2); }
  const uint8_t* v[4] = {f[0].data(), f[1].data(), f[2].data(), f[3].data()};
  std::vector<float> o(n);
  void (*fs[3])(const uint8_t* const*, uint64_t, uint64_t, float*) = {Avg<F, 1>, Avg<F, 2>, Avg<F, 4>};
  std::vector<double> t[3];
  for (int r = 0; r < reps; ++r) for (int k = 0; k < 3; ++k) {
    if (cold) Evict();
    auto t0 = std::chrono::steady_clock::now();
    fs[k](v, 4, n, o.data());
    t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (auto& x : t) std::sort(x.begin(), x.end());
  printf("fmt=%d n=%lu ns/e: 8-step %.3f 16-step %.3f 32-step %.3f\n", F, n, t[0][reps/2]/n*1e9, t[1][reps/2]/n*1e9, t[2][reps/2]/n*1e9);
}
int main() {
  for (uint64_t n : {uint64_t{65536}, uint64_t{1048576}, uint64_t{4194304}, uint64_t{25600000}}) { Run<0>(n); Run<1>(n); Run<2>(n); }
}
