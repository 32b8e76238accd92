#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#define N (25600000UL)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {int cpu; double gbps;} arg_t;
// The EF pass's traffic: read g and e, write e (e = g + e scaled), then write out (the average).
static void* run(void* p){ arg_t* a=p; cpu_set_t s; CPU_ZERO(&s); CPU_SET(a->cpu,&s); pthread_setaffinity_np(pthread_self(),sizeof s,&s);
  float *g=malloc(N*4),*e=malloc(N*4),*o=malloc(N*4); for(size_t i=0;i<N;i++){g[i]=i;e[i]=1;o[i]=0;}
  double t0=now(); int it=0; double bytes=0;
  while(now()-t0<3.0){ for(size_t i=0;i<N;i++) e[i]=g[i]*0.5f+e[i]; for(size_t i=0;i<N;i++) o[i]=e[i]*0.25f; it++; bytes+= (3.0+2.0)*N*4; }
  a->gbps=bytes/(now()-t0)/1e9; fprintf(stderr,"cpu %d: %d iters, %.1f ms/iter\n",a->cpu,it,(now()-t0)/it*1e3); return 0;}
int main(int argc,char**argv){ int k=atoi(argv[1]); pthread_t th[2]; arg_t a[2]; for(int i=0;i<k;i++){a[i].cpu=i;pthread_create(&th[i],0,run,&a[i]);} double tot=0; for(int i=0;i<k;i++){pthread_join(th[i],0); tot+=a[i].gbps;} printf("%d threads: %.1f GB/s total (counted: reads+writes, no RFO)\n",k,tot); }
