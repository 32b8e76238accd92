// The codec's DecodeAverage path, reproduced: the frames' checksum pass
// (XXH3, as base/envelope.cc), then the kernel in chunks of 8192 elements,
// with and without a software prefetch of the next chunk's frame bytes
// (what DenseFrameCodec did before 22a0217), against a memcpy of the same
// 4n bytes; caches evicted before every call. Variant 2 ran a renamed
// build of the 4-bit one-permute kernel (77035eb) as QsgdDecodeAverageV1.
//   g++ -std=c++17 -O2 -Iinclude codec_path_ab.cc quantize.o \
//     quantize_qsgd_average.o v1.o quantize_sign.o divide_x86.o -lxxhash
//   taskset -c 1 ./a.out 8; taskset -c 1 ./a.out 4
#include <xxh_x86dispatch.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "gradwire/kernels/cpu/quantize.h"
namespace gradwire { namespace kernels { namespace cpu {
void QsgdDecodeAverageV1(const uint8_t* const* scales, const uint8_t* const* packed, uint64_t frames,
                       uint64_t n, uint32_t bits, uint32_t bucket_size, float divisor, float* out);
}}}
using namespace gradwire::kernels::cpu;
static std::vector<uint8_t> junk(64 << 20, 1);
static void Evict() { volatile uint64_t s = 0; for (size_t i = 0; i < junk.size(); i += 64) s += junk[i]; }
int main(int argc, char** argv) {
  uint32_t bits = atoi(argv[1]);
  for (uint64_t n : {uint64_t{1048576}, uint64_t{25600000}}) {
    int reps = n < 2000000 ? 41 : 7;
    std::mt19937 rng(1); const uint32_t B = 512; uint64_t nb = (n + B - 1) / B;
    std::vector<std::vector<uint8_t>> sc(4, std::vector<uint8_t>(4 * nb)), pk(4, std::vector<uint8_t>((n * bits + 7) / 8 + 8));
    const uint8_t* s[4]; const uint8_t* p[4];
    for (int r = 0; r < 4; ++r) {
      for (uint64_t b = 0; b < nb; ++b) { float f = 0.001f * (1 + rng() % 100); memcpy(&sc[r][4 * b], &f, 4); }
      for (auto& x : pk[r]) x = rng(); s[r] = sc[r].data(); p[r] = pk[r].data();
    }
    std::vector<float> o(n), src(n, 1.f);
    auto run = [&](int v) {
      if (v == 3) { memcpy(o.data(), src.data(), 4 * n); return; }
      uint64_t h = 0;
      for (int r = 0; r < 4; ++r) h ^= XXH3_64bits_dispatch(p[r], pk[r].size());
      asm volatile("" ::"r"(h));
      const uint64_t chunk = 8192;
      for (uint64_t b = 0; b < n; b += chunk) {
        uint64_t len = std::min(chunk, n - b);
        if (v == 0 && b + chunk < n) {
          for (int r = 0; r < 4; ++r) {
            const uint8_t* a = p[r] + (b + chunk) * bits / 8; uint64_t bytes = std::min(chunk, n - b - chunk) * bits / 8;
            for (uint64_t x = 0; x < bytes; x += 64) __builtin_prefetch(a + x);
          }
        }
        const uint8_t* ss[4]; const uint8_t* pp[4];
        for (int r = 0; r < 4; ++r) { ss[r] = s[r] + 4 * (b / B); pp[r] = p[r] + b * bits / 8; }
        if (v == 2) QsgdDecodeAverageV1(ss, pp, 4, len, bits, B, 4.f, o.data() + b);
        else QsgdDecodeAverage(ss, pp, 4, len, bits, B, 4.f, o.data() + b);
      }
    };
    for (int round = 0; round < 3; ++round) {
      std::vector<double> t[4];
      for (int r = 0; r < reps; ++r) for (int v = 0; v < 4; ++v) {
        Evict();
        auto t0 = std::chrono::steady_clock::now();
        run(v);
        t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      for (auto& x : t) std::sort(x.begin(), x.end());
      double m = t[3][reps / 2];
      printf("n=%lu bits=%u memcpy %.3f ns/e | ratio: with-prefetch %.3f  no-prefetch %.3f  no-prefetch+v1 %.3f\n", n, bits, m / n * 1e9, m / t[0][reps / 2], m / t[1][reps / 2], m / t[2][reps / 2]);
    }
  }
}
