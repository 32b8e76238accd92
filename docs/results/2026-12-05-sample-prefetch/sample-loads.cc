// Microbenchmark for docs/results/2026-12-05-sample-prefetch.md: top-k's key sample's loads
// alone (grad[i] + residual[i] at one scrambled index a stratum, caches evicted), plain and
// with software prefetches, D positions ahead or all first; median of 31.
// SET "hints": each hint (two rounds; output hints.txt); "distances": the L2 hints at 8 to 256
// positions ahead (one round; output distances.txt).
// g++ -O2 -o sample-loads sample-loads.cc && taskset -c 1 ./sample-loads SET N S
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <algorithm>
#include <xmmintrin.h>
static double now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static std::vector<uint8_t> junk(96<<20,1);
static void evict(){uint64_t s=0;for(size_t i=0;i<junk.size();i+=64)s+=junk[i];asm volatile(""::"r"(s));}
static inline uint64_t mix(uint64_t x){x^=x>>33;x*=0xff51afd7ed558ccdULL;x^=x>>33;x*=0xc4ceb9fe1a85ec53ULL;x^=x>>33;return x;}
template <int kHint, int kAhead>
__attribute__((noinline)) void run(const float* g, const float* r, uint32_t* pos, size_t s) {
  if (kAhead < 0) {  // prefetch every position first
    for (size_t j = 0; j < s; j++) { _mm_prefetch((const char*)(g + pos[j]), (_mm_hint)kHint); _mm_prefetch((const char*)(r + pos[j]), (_mm_hint)kHint); }
  }
  for (size_t j = 0; j < s; j++) {
    if (kAhead > 0 && j + kAhead < s) { _mm_prefetch((const char*)(g + pos[j + kAhead]), (_mm_hint)kHint); _mm_prefetch((const char*)(r + pos[j + kAhead]), (_mm_hint)kHint); }
    float a = g[pos[j]] + r[pos[j]]; uint32_t b; memcpy(&b, &a, 4); pos[j] = b & 0x7fffffff;
  }
}
int main(int argc,char**argv){
  const bool hints = argc > 1 && strcmp(argv[1], "hints") == 0;
  size_t n = argc>2?atol(argv[2]):(1<<20); size_t s=argc>3?atol(argv[3]):4096;
  std::vector<float> g(n,1.0f), r(n,0.5f); std::vector<uint32_t> pos(s);
  struct M { const char* name; void (*f)(const float*, const float*, uint32_t*, size_t); };
  std::vector<M> modes;
  if (hints) modes = {{"plain", run<_MM_HINT_T0, 0>}, {"t0 ahead 16", run<_MM_HINT_T0, 16>}, {"t0 ahead 64", run<_MM_HINT_T0, 64>},
               {"t2 ahead 16", run<_MM_HINT_T2, 16>}, {"t2 ahead 64", run<_MM_HINT_T2, 64>}, {"t2 all first", run<_MM_HINT_T2, -1>},
               {"t0 all first", run<_MM_HINT_T0, -1>}, {"nta ahead 32", run<_MM_HINT_NTA, 32>}};
  else modes = {{"plain", run<_MM_HINT_T0, 0>}, {"t2 ahead 8", run<_MM_HINT_T2, 8>}, {"t2 ahead 32", run<_MM_HINT_T2, 32>}, {"t2 ahead 64", run<_MM_HINT_T2, 64>},
               {"t2 ahead 128", run<_MM_HINT_T2, 128>}, {"t2 ahead 256", run<_MM_HINT_T2, 256>}, {"t1 ahead 64", run<_MM_HINT_T1, 64>}};
  for (int round = 0; round < (hints ? 2 : 1); round++)
  for (auto& m : modes) {
    std::vector<double> t;
    for(int rep=0;rep<31;rep++){
      size_t st=n/s; for(size_t j=0;j<s;j++) pos[j]=j*st+ mix(j+rep*s)%st;
      evict();
      double t0=now(); m.f(g.data(), r.data(), pos.data(), s); t.push_back(now()-t0); asm volatile(""::"r"(pos.data()):"memory"); }
    std::sort(t.begin(),t.end()); printf("%-14s n=%zu s=%zu: %.1f us (q1 %.1f q3 %.1f)\n",m.name,n,s,t[t.size()/2]*1e6,t[t.size()/4]*1e6,t[3*t.size()/4]*1e6);
  }
}
