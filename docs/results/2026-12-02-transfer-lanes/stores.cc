#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cstdint>
#include <algorithm>
static std::vector<uint8_t> junk(128<<20, 1);
static void Evict(){ volatile uint64_t s=0; for(size_t i=0;i<junk.size();i+=64) s+=junk[i]; }
int main(int argc,char**argv){
  size_t n = argc>1? atol(argv[1]) : (1<<20);
  std::vector<float> src(n+16, 1.0f);
  float* o = (float*)aligned_alloc(64, (n*4+63)/64*64); memset(o,1,n*4);
  alignas(64) float acc[4096]; for(int i=0;i<4096;i++) acc[i]=i;
  auto run=[&](const char* name, auto f){
    std::vector<double> ts;
    for(int rep=0;rep<15;rep++){ Evict(); auto t0=std::chrono::steady_clock::now(); f(); auto t1=std::chrono::steady_clock::now(); ts.push_back(std::chrono::duration<double,std::milli>(t1-t0).count()); }
    std::sort(ts.begin(),ts.end()); printf("%-28s %.3f ms\n",name,ts[ts.size()/2]);
  };
  run("memcpy src->out", [&]{ memcpy(o, src.data(), n*4); });
  run("vector mul store", [&]{ __m512 q=_mm512_set1_ps(0.25f); for(size_t c=0;c<n;c+=4096) for(size_t i=0;i<4096;i+=16) _mm512_storeu_ps(o+c+i,_mm512_mul_ps(_mm512_load_ps(acc+i),q)); });
  run("mul in acc + memcpy chunk", [&]{ __m512 q=_mm512_set1_ps(0.25f); for(size_t c=0;c<n;c+=4096){ for(size_t i=0;i<4096;i+=16) _mm512_store_ps(acc+i,_mm512_mul_ps(_mm512_load_ps(acc+i),q)); memcpy(o+c,acc,16384);} });
  run("rep movsb chunk", [&]{ for(size_t c=0;c<n;c+=4096){ void* d=o+c; const void* s=acc; size_t cnt=16384; asm volatile("rep movsb":"+D"(d),"+S"(s),"+c"(cnt)::"memory"); } });
  run("stream store", [&]{ __m512 q=_mm512_set1_ps(0.25f); for(size_t c=0;c<n;c+=4096) for(size_t i=0;i<4096;i+=16) _mm512_stream_ps(o+c+i,_mm512_mul_ps(_mm512_load_ps(acc+i),q)); _mm_sfence(); });
  run("memset out", [&]{ memset(o, 0, n*4); });
  return 0;
}
