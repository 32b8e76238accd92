// EF-shaped sweep: r[i] += g[i] over n floats (reads 8 B, writes 4 B per element),
// repeated for `seconds`; prints GB/s of traffic (12 B per element) per sweep, median.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
int main(int argc, char** argv) {
  const size_t n = 25600000;
  const double seconds = argc > 1 ? atof(argv[1]) : 3;
  std::vector<float> g(n, 1.0f), r(n, 0.5f);
  std::vector<double> gbs;
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    auto t0 = std::chrono::steady_clock::now();
    float* __restrict rp = r.data(); const float* __restrict gp = g.data();
    for (size_t i = 0; i < n; ++i) rp[i] += gp[i];
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbs.push_back(12.0 * n / s / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  printf("%.1f GB/s (median of %zu sweeps, %.2f ms each)\n", gbs[gbs.size()/2], gbs.size(), 12.0*n/gbs[gbs.size()/2]/1e6);
  return r[7] == 42;
}
