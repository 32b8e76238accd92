// Prototype (not project code): four frames' sparse entries averaged into a
// dense output of n floats, cold caches (1 GiB read between calls), one core:
// "scalar" is SparseAverage's scheme (entries added into an L1 chunk, then
// multiplied by 1/4 on the way out), "expand" the same sums from bitmaps by
// AVX-512 expand loads; output stores ordinary or streaming (argv[3]).
//   g++ -O2 -march=native stores-proto.cc && taskset -c 1 ./a.out 25600000 0.1 stream
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
#include <string>
using namespace std;
static double now() { return chrono::duration<double>(chrono::steady_clock::now().time_since_epoch()).count(); }
vector<uint8_t> junk(1u << 30, 1);
void evict() { uint64_t s = 0; for (size_t i = 0; i < junk.size(); i += 64) s += junk[i]; asm volatile("" ::"r"(s)); }
constexpr uint64_t kChunk = 4096;
int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? atoll(argv[1]) : 25600000;
  const double d = argc > 2 ? atof(argv[2]) : 0.1;
  const int P = 4;
  const bool stream = argc > 3 && std::string(argv[3]) == "stream";
  mt19937_64 rng(1);
  vector<vector<uint32_t>> idx(P);
  vector<vector<float>> val(P);
  vector<vector<uint16_t>> bm(P);
  for (int r = 0; r < P; ++r) {
    bm[r].assign((n + 15) / 16, 0);
    for (uint64_t i = 0; i < n; ++i) if ((rng() % 1000000) < d * 1000000) { idx[r].push_back(i); val[r].push_back((float)(rng() % 1000) / 7.0f); bm[r][i / 16] |= 1u << (i % 16); }
  }
  float* outp=(float*)aligned_alloc(64,((4*n+63)/64)*64); float* out2p=(float*)aligned_alloc(64,((4*n+63)/64)*64); memset(outp,0,4*n); memset(out2p,0,4*n);
  for (int rep = 0; rep < 5; ++rep) {
    // A: scalar adds into L1 acc
    evict();
    double t0 = now();
    {
      alignas(64) float acc[kChunk] = {};
      vector<uint64_t> j(P, 0);
      for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
        uint64_t len = min(n - c0, kChunk);
        for (int r = 0; r < P; ++r) {
          const uint32_t* I = idx[r].data(); const float* V = val[r].data(); uint64_t k = idx[r].size();
          uint64_t q = j[r];
          for (; q < k && I[q] < c0 + len; ++q) acc[I[q] - c0] += V[q];
          j[r] = q;
        }
        for (uint64_t e = 0; e < len; e += 16) { __m512 a = _mm512_load_ps(acc + e); { __m512 q = _mm512_mul_ps(a, _mm512_set1_ps(0.25f)); if (stream) _mm512_stream_ps(&outp[c0 + e], q); else _mm512_store_ps(&outp[c0 + e], q); } _mm512_store_ps(acc + e, _mm512_setzero_ps()); }
      }
    }
    double ta = now() - t0;
    evict();
    t0 = now();
    {
      vector<const float*> vp(P);
      for (int r = 0; r < P; ++r) vp[r] = val[r].data();
      for (uint64_t g0 = 0; g0 < n / 16; g0 += kChunk / 16) {
        uint64_t g1 = min(n / 16, g0 + kChunk / 16);
        alignas(64) float acc[kChunk];
        for (uint64_t g = g0; g < g1; ++g) _mm512_store_ps(acc + 16 * (g - g0), _mm512_setzero_ps());
        for (int r = 0; r < P; ++r) {
          const uint16_t* B = bm[r].data(); const float* v = vp[r];
          for (uint64_t g = g0; g < g1; ++g) {
            __mmask16 m = B[g];
            __m512 x = _mm512_maskz_expandloadu_ps(m, v);
            v += __builtin_popcount(m);
            float* a = acc + 16 * (g - g0);
            _mm512_store_ps(a, _mm512_add_ps(_mm512_load_ps(a), x));
          }
          vp[r] = v;
        }
        for (uint64_t g = g0; g < g1; ++g) { __m512 q = _mm512_mul_ps(_mm512_load_ps(acc + 16 * (g - g0)), _mm512_set1_ps(0.25f)); if (stream) _mm512_stream_ps(&out2p[16 * g], q); else _mm512_store_ps(&out2p[16 * g], q); }
      }
    }
    double tb = now() - t0;
    evict();
    t0 = now();
        static vector<float> dst(n);
    memcpy(dst.data(), outp, 4 * n);
    double tm = now() - t0;
    printf("scalar %.2f ms  expand %.2f ms  memcpy %.2f ms  ratio %.3f / %.3f  same=%d\n", ta * 1e3, tb * 1e3, tm * 1e3, tm / ta, tm / tb, memcmp(outp, out2p, 4 * (n / 16 * 16)) == 0);
  }
}
