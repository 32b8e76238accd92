// QsgdDecodeAverage, three builds in one process, alternated call by call:
// V1 = the kernel at 77035eb (4-bit one-permute; 3, 5, 6, 7 bits by the
// three steps), V2 = 3, 5, 6, 7 bits in one pass eight a step, V3 = the
// committed 5ad4e57 (sixteen a step where codes decode by QsgdLevelOf).
// 4 payloads of random codes, bucket 512, n = 64K (hot, in L2) and 1M
// (caches evicted before every call); median ns an element.
// Each variant is kernels/cpu/quantize_qsgd_average.cc at its commit with
// QsgdDecodeAverage renamed (sed 's/^void QsgdDecodeAverage(/void
// QsgdDecodeAverageV1(/'), built with Bazel's flags for kernels/cpu:
//   g++ -std=c++17 -O3 -ffp-contract=off -Iinclude -c vN.cc   (include/gradwire -> repo)
//   g++ -std=c++17 -O2 -Iinclude kernel_ab.cc v1.o v2.o v3.o quantize.o \
//     quantize_sign.o divide_x86.o -o kernel_ab && taskset -c 1 ./kernel_ab
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <cstdint>
namespace gradwire { namespace kernels { namespace cpu {
#define DECL(N) void N(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames, uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out);
DECL(QsgdDecodeAverageV1) DECL(QsgdDecodeAverageV2) DECL(QsgdDecodeAverageV3)
}}}
using namespace gradwire::kernels::cpu;
static std::vector<uint8_t> junk(64 << 20, 1);
static void Evict() { volatile uint64_t s = 0; for (size_t i = 0; i < junk.size(); i += 64) s += junk[i]; }
int main(int argc, char** argv) {
  decltype(&QsgdDecodeAverageV1) fs[3] = {QsgdDecodeAverageV1, QsgdDecodeAverageV2, QsgdDecodeAverageV3};
  for (uint32_t bits : {3u, 4u, 6u, 8u})
  for (uint64_t n : {uint64_t{65536}, uint64_t{1048576}}) {
    bool cold = n > 65536; int reps = cold ? 31 : 501;
    std::mt19937 rng(1); const uint32_t B = 512; uint64_t nb = (n + B - 1) / B;
    std::vector<std::vector<uint8_t>> sc(4, std::vector<uint8_t>(4 * nb)), pk(4, std::vector<uint8_t>((n * bits + 7) / 8));
    const uint8_t* s[4]; const uint8_t* p[4];
    for (int r = 0; r < 4; ++r) {
      for (uint64_t b = 0; b < nb; ++b) { float f = 0.001f * (1 + rng() % 100); memcpy(&sc[r][4 * b], &f, 4); }
      for (auto& x : pk[r]) x = rng(); s[r] = sc[r].data(); p[r] = pk[r].data();
    }
    std::vector<float> o[3] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
    for (int v = 0; v < 3; ++v) fs[v](s, p, 4, n, bits, B, 4.f, o[v].data());
    bool same = memcmp(o[0].data(), o[1].data(), 4 * n) == 0 && memcmp(o[0].data(), o[2].data(), 4 * n) == 0;
    std::vector<double> t[3];
    for (int r = 0; r < reps; ++r) for (int v = 0; v < 3; ++v) {
      if (cold) Evict();
      auto t0 = std::chrono::steady_clock::now();
      fs[v](s, p, 4, n, bits, B, 4.f, o[0].data());
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (auto& x : t) std::sort(x.begin(), x.end());
    printf("bits=%u n=%lu same=%d  committed %.3f  8-wide %.3f  16-wide %.3f ns/e\n", bits, n, same, t[0][reps/2]/n*1e9, t[1][reps/2]/n*1e9, t[2][reps/2]/n*1e9);
  }
}
