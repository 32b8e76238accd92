// Microbenchmark for docs/results/2026-12-05-zen4-prefetch.md: glibc memcpy (mode 0) against a
// 256-byte block loop (mode 1) by the destination's distance past the source modulo 4 KiB.
// g++ -O2 -o copy-aliasing copy-aliasing.cc && taskset -c 1 ./copy-aliasing BYTES MODE
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
__attribute__((noinline)) static void loop64(uint8_t* d,const uint8_t* s,size_t n){
  size_t i=0; for(;i+256<=n;i+=256){ uint8_t b[256]; __builtin_memcpy(b,s+i,256); __builtin_memcpy(d+i,b,256);} memcpy(d+i,s+i,n-i);}
int main(int argc,char**argv){
  size_t n = atol(argv[1]); int mode=atoi(argv[2]);
  uint8_t* S=(uint8_t*)aligned_alloc(4096,n+8192); uint8_t* D=(uint8_t*)aligned_alloc(4096,n+8192);
  memset(D,0,n+8192);
  for(int soff: {0,16,1000}) { for(int delta: {0,4,13,24,40,64,128,200,1024,2048,4000,4090}){
    uint8_t* src=S+soff; uint8_t* dst=D+((soff+delta)%4096);
    std::vector<double> t;
    for(int r=0;r<11;r++){ evict(); memset(src,r,n);
      double t0=now(); if(mode) loop64(dst,src,n); else memcpy(dst,src,n); t.push_back(now()-t0);}
    std::sort(t.begin(),t.end()); printf("%d:%.0f ",delta,t[t.size()/2]*1e6);
  } printf(" (src %% 4096 = %d)\n",soff);}
}
