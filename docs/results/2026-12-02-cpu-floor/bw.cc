// Memory bandwidth of 1 and 2 threads: memcpy of 256 MB buffers, and a
// read+read+write pass like error feedback (c = a + b), each thread its own buffers.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include <cstdlib>
int main(int argc, char** argv) {
  const size_t n = size_t{64} << 20;  // floats: 256 MB
  int threads = atoi(argv[1]);
  int kind = atoi(argv[2]);
  std::vector<std::vector<float>> a(threads, std::vector<float>(n, 1)), b(threads, std::vector<float>(n, 2)),
      c(threads, std::vector<float>(n, 0));
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (int it = 0; it < 4; ++it) {
          if (kind == 0) std::memcpy(c[t].data(), a[t].data(), 4 * n);
          else { float* x = a[t].data(); float* y = b[t].data(); float* z = c[t].data();
                 for (size_t i = 0; i < n; ++i) y[i] = x[i] + y[i]; }
        }
      });
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double bytes = (kind == 0 ? 2.0 : 3.0) * 4 * n * 4 * threads;
    printf("threads %d kind %s: %.1f GB/s total (%.1f ms per pass per thread)\n", threads,
           kind == 0 ? "memcpy" : "y+=x", bytes / s / 1e9, s / 4 * 1e3);
  }
}
