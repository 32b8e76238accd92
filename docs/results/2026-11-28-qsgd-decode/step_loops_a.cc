// Stand-alone fp16 decode-average of four payloads, 8, 16 and 32 elements a step, caches
// evicted before each call (n > 64K); one build. g++ -O2 -mavx2 -mf16c -std=c++17
// fp16 decode-average of 4 frames: 32 a step (four sums) vs 8 a step, cold out.
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
__attribute__((noinline)) void A32(const uint8_t* const* v, uint64_t frames, uint64_t n, float* out) {
  const __m256 by = _mm256_set1_ps(0.25f);
  for (uint64_t i = 0; i + 32 <= n; i += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (uint64_t r = 0; r < frames; ++r) {
      const __m128i* p = reinterpret_cast<const __m128i*>(v[r] + 2 * i);
      s0 = _mm256_add_ps(s0, _mm256_cvtph_ps(_mm_loadu_si128(p)));
      s1 = _mm256_add_ps(s1, _mm256_cvtph_ps(_mm_loadu_si128(p + 1)));
      s2 = _mm256_add_ps(s2, _mm256_cvtph_ps(_mm_loadu_si128(p + 2)));
      s3 = _mm256_add_ps(s3, _mm256_cvtph_ps(_mm_loadu_si128(p + 3)));
    }
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s0, by)); _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(s1, by));
    _mm256_storeu_ps(out + i + 16, _mm256_mul_ps(s2, by)); _mm256_storeu_ps(out + i + 24, _mm256_mul_ps(s3, by));
  }
}
__attribute__((noinline)) void A8(const uint8_t* const* v, uint64_t frames, uint64_t n, float* out) {
  const __m256 by = _mm256_set1_ps(0.25f);
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    __m256 s0 = _mm256_setzero_ps();
    for (uint64_t r = 0; r < frames; ++r)
      s0 = _mm256_add_ps(s0, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v[r] + 2 * i))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s0, by));
  }
}
__attribute__((noinline)) void A16(const uint8_t* const* v, uint64_t frames, uint64_t n, float* out) {
  const __m256 by = _mm256_set1_ps(0.25f);
  for (uint64_t i = 0; i + 16 <= n; i += 16) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    for (uint64_t r = 0; r < frames; ++r) {
      const __m128i* p = reinterpret_cast<const __m128i*>(v[r] + 2 * i);
      s0 = _mm256_add_ps(s0, _mm256_cvtph_ps(_mm_loadu_si128(p)));
      s1 = _mm256_add_ps(s1, _mm256_cvtph_ps(_mm_loadu_si128(p + 1)));
    }
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s0, by)); _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(s1, by));
  }
}
int main() {
  for (uint64_t n : {uint64_t{65536}, uint64_t{1048576}, uint64_t{25600000}}) {
    bool cold = n > 65536; int reps = n > 2000000 ? 7 : cold ? 41 : 501;
    std::vector<std::vector<uint8_t>> f(4, std::vector<uint8_t>(2 * n));
    std::mt19937 rng(1);
    for (auto& x : f) for (size_t i = 0; i < x.size(); i += 2) { uint16_t h = 0x3000 | (rng() & 0x7ff) | ((rng() & 1) << 15); memcpy(&x[i], &h, 2); }
    const uint8_t* v[4] = {f[0].data(), f[1].data(), f[2].data(), f[3].data()};
    std::vector<float> o(n), src(n, 1.f);
    void (*fs[3])(const uint8_t* const*, uint64_t, uint64_t, float*) = {A8, A16, A32};
    std::vector<double> t[4];
    for (int r = 0; r < reps; ++r) for (int k = 0; k < 4; ++k) {
      if (cold) Evict();
      auto t0 = std::chrono::steady_clock::now();
      if (k == 3) memcpy(o.data(), src.data(), 4 * n); else fs[k](v, 4, n, o.data());
      t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (auto& x : t) std::sort(x.begin(), x.end());
    printf("n=%lu ns/e: 8-step %.3f 16-step %.3f 32-step %.3f memcpy %.3f\n", n, t[0][reps/2]/n*1e9, t[1][reps/2]/n*1e9, t[2][reps/2]/n*1e9, t[3][reps/2]/n*1e9);
  }
}
