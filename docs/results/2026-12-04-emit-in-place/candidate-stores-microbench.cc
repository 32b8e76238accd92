// A model of top-k's fused pass (acc = grad + residual, the residual
// written back, about 12 % of the elements appended to two candidate
// lists by register compress), to see what the candidate stores cost
// and whether streaming stores could save their reads for ownership.
// Not gradwire code: built by hand, `g++ -O2 -o pass
// candidate-stores-microbench.cc`, run `taskset -c 1 ./pass N`; each mode
// the median of 15 calls from evicted caches, in ms.
//   mode 0: the lists as top-k writes them (unaligned full-width stores)
//   mode 1: the stores into a 4 KiB ring instead (a bound: no list)
//   mode 2: staged in a stack buffer, flushed a line at a time by
//           streaming stores
//   mode 3: staged in registers (expand, permute), streaming stores
//   mode 4: as 3 with ordinary aligned stores
//   mode 5, 6: mode 0 plus prefetchw 1 KiB / 4 KiB ahead of the lists
#include <algorithm>
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <cstdint>
static void Evict() {
  static std::vector<uint8_t> junk(128 << 20, 1);
  uint64_t s = 0; for (size_t i = 0; i < junk.size(); i += 64) s += junk[i];
  asm volatile("" :: "r"(s));
}
// mode 0: big array stores; 1: small ring; 2: staged NT stores
template <int kMode>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) uint64_t Pass(const float* g, float* r, uint64_t n, uint32_t lower, uint32_t* ci, float* cv, uint32_t* ri, float* rv) {
  uint64_t m = 0, out = 0;
  alignas(64) uint32_t si[48]; alignas(64) float sv[48];
  uint64_t fill = 0; __m512i ai = _mm512_setzero_si512(); __m512 av = _mm512_setzero_ps();
  __m512i index = _mm512_setr_epi32(0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15);
  const __m512i lo = _mm512_set1_epi32(lower);
  for (uint64_t i = 0; i + 16 <= n; i += 16) {
    __builtin_prefetch(g + i + 512); __builtin_prefetch(r + i + 512, 1);
    __m512 a = _mm512_add_ps(_mm512_loadu_ps(g + i), _mm512_loadu_ps(r + i));
    __m512i abs = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff));
    __mmask16 pass = _mm512_cmpge_epi32_mask(abs, lo);
    _mm512_storeu_ps(r + i, _mm512_maskz_mov_ps(~pass, a));
    const uint64_t c = __builtin_popcount(pass);
    if (kMode == 5 || kMode == 6) {
      const uint64_t ahead = kMode == 5 ? 256 : 1024;
      __builtin_prefetch(ci + m + ahead, 1, 3); __builtin_prefetch(cv + m + ahead, 1, 3);
      _mm512_storeu_si512(ci + m, _mm512_maskz_compress_epi32(pass, index));
      _mm512_storeu_ps(cv + m, _mm512_maskz_compress_ps(pass, a));
    } else if (kMode == 0) {
      _mm512_storeu_si512(ci + m, _mm512_maskz_compress_epi32(pass, index));
      _mm512_storeu_ps(cv + m, _mm512_maskz_compress_ps(pass, a));
    } else if (kMode == 1) {
      _mm512_storeu_si512(ri + (m & 1023), _mm512_maskz_compress_epi32(pass, index));
      _mm512_storeu_ps(rv + (m & 1023), _mm512_maskz_compress_ps(pass, a));
    } else if (kMode == 3 || kMode == 4) {
      const __m512i ci16 = _mm512_maskz_compress_epi32(pass, index);
      const __m512 cv16 = _mm512_maskz_compress_ps(pass, a);
      const __mmask16 into = (__mmask16)(((1u << c) - 1) << fill);
      ai = _mm512_mask_expand_epi32(ai, into, ci16);
      av = _mm512_mask_expand_ps(av, into, cv16);
      fill += c;
      if (fill >= 16) {
        if (kMode == 3) { _mm512_stream_si512((__m512i*)(ci + out), ai); _mm512_stream_ps(cv + out, av); }
        else { _mm512_store_si512(ci + out, ai); _mm512_store_ps(cv + out, av); }
        out += 16; fill -= 16;
        const __m512i sh = _mm512_add_epi32(_mm512_setr_epi32(0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15), _mm512_set1_epi32((int)(c - fill)));
        ai = _mm512_permutexvar_epi32(sh, ci16);
        av = _mm512_permutexvar_ps(sh, cv16);
      }
    } else {
      _mm512_storeu_si512(si + fill, _mm512_maskz_compress_epi32(pass, index));
      _mm512_storeu_ps(sv + fill, _mm512_maskz_compress_ps(pass, a));
      fill += c;
      if (fill >= 16) {
        _mm512_stream_si512((__m512i*)(ci + out), _mm512_load_si512(si));
        _mm512_stream_ps(cv + out, _mm512_load_ps(sv));
        _mm512_store_si512(si, _mm512_loadu_si512(si + 16));
        _mm512_store_ps(sv, _mm512_loadu_ps(sv + 16));
        out += 16; fill -= 16;
      }
    }
    m += c;
    index = _mm512_add_epi32(index, _mm512_set1_epi32(16));
  }
  _mm_sfence();
  return m;
}
int main(int argc, char** argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 25600000;
  std::vector<float> g(n), r(n, 0.0f);
  std::mt19937 rng(1); std::normal_distribution<float> d;
  for (auto& x : g) x = d(rng);
  // threshold at ~12% (|x| >= 1.55)
  float th = 1.55f; uint32_t lower; memcpy(&lower, &th, 4);
  uint32_t* ci = (uint32_t*)aligned_alloc(64, n * 4); float* cv = (float*)aligned_alloc(64, n * 4);
  memset(ci, 0, n*4); memset(cv, 0, n*4);
  alignas(64) static uint32_t ri[2048]; alignas(64) static float rv[2048];
  double t[7][15];
  for (int rep = 0; rep < 15; ++rep) for (int mode = 0; mode < 7; ++mode) {
    Evict();
    auto t0 = std::chrono::steady_clock::now();
    uint64_t m = mode == 5 ? Pass<5>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : mode == 6 ? Pass<6>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : mode == 3 ? Pass<3>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : mode == 4 ? Pass<4>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : mode == 0 ? Pass<0>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : mode == 1 ? Pass<1>(g.data(), r.data(), n, lower, ci, cv, ri, rv) : Pass<2>(g.data(), r.data(), n, lower, ci, cv, ri, rv);
    t[mode][rep] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
    if (rep == 0 && mode == 0) printf("m/n = %.3f\n", (double)m / n);
  }
  for (int mode = 0; mode < 7; ++mode) { std::sort(t[mode], t[mode] + 15); printf("mode %d median %.3f ms\n", mode, t[mode][7]); }
}
