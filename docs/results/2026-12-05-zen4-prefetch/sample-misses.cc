// Microbenchmark for docs/results/2026-12-05-zen4-prefetch.md: the key sample's loads alone
// (modes: see sample-misses.txt). g++ -O2 -o sample-misses sample-misses.cc &&
// taskset -c 1 ./sample-misses N S PER_PAGE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <algorithm>
static double now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static std::vector<uint8_t> junk(64<<20,1);
static void evict(){uint64_t s=0;for(size_t i=0;i<junk.size();i+=64)s+=junk[i];asm volatile(""::"r"(s));}
static inline uint64_t mix(uint64_t x){x^=x>>33;x*=0xff51afd7ed558ccdULL;x^=x>>33;x*=0xc4ceb9fe1a85ec53ULL;x^=x>>33;return x;}
int main(int argc,char**argv){
  size_t n = argc>1?atol(argv[1]):(1<<20); size_t s=argc>2?atol(argv[2]):4096; size_t per=argc>3?atol(argv[3]):16;
  std::vector<float> g(n,1.0f), r(n,0.5f); std::vector<uint32_t> pos(s), out(s);
  for(int mode=0;mode<4;mode++){
    // 0: one per stratum (all pages); 1: 16 per page over s/16 pages (stratified pages); 2: 4 per line; 3: pages pretouched (TLB warm) + mode 0
    for(size_t j=0;j<s;j++){
      if(mode==0||mode==3){ size_t st=n/s; pos[j]=j*st+ mix(j)%st; }
      else if(mode==1){ size_t pages=s/per, pst=n/pages; size_t p=j/per, l=j%per; pos[j]=p*pst + (mix(p)%(pst/1024))*1024 + l*(1024/per) + mix(j)%(1024/per); }
      else { size_t lines=s/4, lst=n/lines; size_t L=j/4; pos[j]=L*lst + (mix(L)%(lst/16))*16 + (j%4)*4 + mix(j)%4; }
    }
    std::vector<double> t;
    for(int rep=0;rep<31;rep++){ evict();
      if(mode==3){ uint64_t z=0; for(size_t i=0;i<n;i+=1024){ z+=((uint32_t*)g.data())[i+1023]; z+=((uint32_t*)r.data())[i+1023];} asm volatile(""::"r"(z)); }
      double t0=now(); for(size_t j=0;j<s;j++){ float a=g[pos[j]]+r[pos[j]]; uint32_t b; memcpy(&b,&a,4); out[j]=b&0x7fffffff; } t.push_back(now()-t0); asm volatile(""::"r"(out.data()):"memory"); }
    std::sort(t.begin(),t.end()); printf("mode %d: %.1f us\n",mode,t[t.size()/2]*1e6);
  }
}
