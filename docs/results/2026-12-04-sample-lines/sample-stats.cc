// How far the sample's bound can be trusted: for gradients of several
// shapes, how often the sampled lower bound lets fewer than k elements
// through (the kernel's fallback), the candidates per selected element
// (m / k), and z, the true k-th key's count among the sampled keys less
// its expectation, in units of sqrt(expectation) (the bound pads by 5).
//   mkdir inc && ln -s /path/to/gradwire inc/gradwire
//   g++ -O2 -std=c++17 -Iinc sample-stats.cc -o stat
//   ./stat 1048576 40                          # synthetic shapes
//   ./stat 1129514 20 grads.f32                # cnn-gradients.py's 20 gradients
// stats/*-a.txt: the sample before (one key a line), *-b.txt: four keys a
// line (now), *-c.txt: four keys a line and 16384 keys at 10 % (not kept);
// run with the prototype (prototype/prototype.diff, GW_CLUSTER).
#include <cstdio>
#include <cmath>
#include <random>
#include <vector>
#include <algorithm>
#include "gradwire/kernels/cpu/topk_sample.h"
using namespace gradwire::kernels;
using namespace gradwire::kernels::cpu::internal;
int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? atoll(argv[1]) : (1 << 20);
  const int trials = argc > 2 ? atoi(argv[2]) : 20;
  std::vector<uint64_t> hist(kTopBins);
  std::vector<uint32_t> sample(kSampleSize);
  std::vector<float> g(n);
  std::vector<uint32_t> keys(n);
  const char* names[] = {"iid-t", "scale16", "ar0.9", "scale4k+ar0.5", "const-runs", "cnn"};
  std::vector<float> real;
  if (argc > 3) { FILE* f = fopen(argv[3], "rb"); real.resize(20 * n); if (fread(real.data(), 4, 20 * n, f) != 20 * n) return 1; fclose(f); }
  for (int shape = argc > 3 ? 5 : 0; shape < (argc > 3 ? 6 : 5); ++shape) {
    for (double d : {0.1, 0.01, 0.001}) {
      const uint64_t k = static_cast<uint64_t>(d * n);
      int fall = 0; double mk = 0, zmax = -1e9, zsum = 0, zsq = 0;
      for (int t = 0; t < trials; ++t) {
        std::mt19937_64 rng(1000 * shape + t + 7);
        std::normal_distribution<float> N(0, 1);
        std::student_t_distribution<float> T(3);
        float prev = 0, scale = 1;
        for (uint64_t i = 0; i < n; ++i) {
          if (shape == 5) { g[i] = real[(t % 20) * n + i]; continue; }
          switch (shape) {
            case 0: g[i] = T(rng); break;
            case 1: if (i % 16 == 0) scale = std::exp(1.5f * N(rng)); g[i] = scale * N(rng); break;
            case 2: prev = 0.9f * prev + 0.436f * N(rng); g[i] = prev; break;
            case 3: if (i % 4096 == 0) scale = std::exp(2.f * N(rng)); prev = 0.5f * prev + 0.87f * N(rng); g[i] = scale * prev; break;
            case 4: if (i % 8 == 0) prev = T(rng); g[i] = prev; break;  // runs of 8 equal values
          }
        }
        const uint64_t s = SampleSize(n, k);
        SampledBounds b = SampleLowerBound(g.data(), nullptr, n, k, s, false, sample.data(), hist.data());
        {
          // the z of the true k-th key's count in the sample
          std::vector<uint32_t> pos(s);
          for (uint64_t i = 0; i < n; ++i) keys[i] = gradwire::kernels::MagnitudeKey(g[i]);
          std::vector<uint32_t> kk(keys);
          std::nth_element(kk.begin(), kk.begin() + (k - 1), kk.end(), std::greater<uint32_t>());
          const uint32_t kth = kk[k - 1];
          // sample[] now holds sampled keys (SampleLowerBound overwrote positions with keys)
          uint64_t c = 0;
          for (uint64_t j = 0; j < s; ++j) c += sample[j] >= kth;
          const double e = double(k) * s / n;
          const double z = (c - e) / std::sqrt(e);
          if (z > zmax) zmax = z;
          zsum += z; zsq += z * z;
        }
        uint64_t m = 0;
        for (uint64_t i = 0; i < n; ++i) m += gradwire::kernels::MagnitudeKey(g[i]) >= b.lower;
        if (m < k) ++fall; else mk += double(m) / k;
      }
      printf("%-14s d=%-6g fallbacks %d/%d  mean m/k %.3f  z max %.2f sd(z) %.2f\n", names[shape], d, fall, trials, trials > fall ? mk / (trials - fall) : 0, zmax, std::sqrt(zsq / trials - (zsum / trials) * (zsum / trials)));
    }
  }
}
