// gpu_bench in a build without CUDA: says so instead of measuring nothing.
#include <cstdio>

int main() {
  std::printf("SKIPPED: gradwire was built without CUDA\n");
  return 0;
}
