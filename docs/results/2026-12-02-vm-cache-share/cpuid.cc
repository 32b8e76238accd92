#include <cpuid.h>
#include <cstdio>
int main() {
  for (unsigned sub = 0; sub < 6; ++sub) {
    unsigned a, b, c, d;
    __cpuid_count(4, sub, a, b, c, d);
    unsigned type = a & 31; if (!type) break;
    unsigned level = (a >> 5) & 7, sharing = ((a >> 14) & 0xfff) + 1, cores = ((a >> 26) & 63) + 1;
    unsigned long size = (unsigned long)(((b >> 22) & 0x3ff) + 1) * (((b >> 12) & 0x3ff) + 1) * ((b & 0xfff) + 1) * (c + 1);
    printf("leaf4 sub %u: type %u level %u sharing %u cores/pkg %u size %lu KiB\n", sub, type, level, sharing, cores, size >> 10);
  }
  unsigned a, b, c, d;
  __cpuid(1, a, b, c, d);
  printf("hypervisor bit %u\n", (c >> 31) & 1);
  __cpuid(0x40000000, a, b, c, d);
  char v[13] = {}; *(unsigned*)v = b; *(unsigned*)(v + 4) = c; *(unsigned*)(v + 8) = d;
  printf("hv vendor '%s'\n", v);
}
