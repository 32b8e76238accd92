#include "gradwire/kernels/cpu/streaming_store.h"

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstdio>
#include <cstring>
#include <string>

namespace gradwire {
namespace kernels {
namespace cpu {
namespace {

// One small sysfs file's first line, or "" when it cannot be read.
std::string ReadLine(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  char line[256] = {};
  const bool ok = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return ok ? std::string(line) : "";
}

// "32768K" (sysfs's form), "4M" or a byte count; 0 when it is none.
uint64_t ParseSize(const std::string& text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > (uint64_t{1} << 40)) return 0;  // no cache is this large
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return 0;
  if (i < text.size() && text[i] == 'K') return value << 10;
  if (i < text.size() && text[i] == 'M') return value << 20;
  return value;
}

// cpu0's last-level cache: its size and the CPUs sharing it, and the
// streaming threshold they give.
struct LastLevel {
  uint64_t bytes = 0;
  uint64_t sharers = 0;
  uint64_t threshold = 0;
};

// The unified or data cache of the highest level sysfs lists for cpu0
// (its sharers from the same entry); else sysconf's L3 (one sharer); else
// 32 MiB. Read once.
const LastLevel& CachedLastLevel() {
  static const LastLevel cache = [] {
    LastLevel c;
    uint64_t best_level = 0;
    for (int index = 0; index < 8; ++index) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
      const uint64_t level = ParseSize(ReadLine(dir + "/level"));
      const std::string type = ReadLine(dir + "/type");
      if (level == 0 || type.rfind("Instruction", 0) == 0) continue;
      const uint64_t size = ParseSize(ReadLine(dir + "/size"));
      if (level > best_level && size > 0) {
        best_level = level;
        c.bytes = size;
        c.sharers = CountCpuList(ReadLine(dir + "/shared_cpu_list"));
      }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (c.bytes == 0) {
      const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
      if (l3 > 0) c.bytes = static_cast<uint64_t>(l3);
    }
#endif
    if (c.bytes == 0) c.bytes = uint64_t{32} << 20;
    if (c.sharers == 0) c.sharers = 1;
    c.threshold = StreamingThresholdFor(c.bytes, c.sharers, UnderHypervisor());
    return c;
  }();
  return cache;
}

}  // namespace

uint64_t CountCpuList(const std::string& text) {
  const std::string list = text.substr(0, text.find('\n'));
  size_t i = 0;
  // A CPU number of at most 9 digits at i; false if none is there.
  auto number = [&](uint64_t* v) {
    const size_t start = i;
    *v = 0;
    for (; i < list.size() && list[i] >= '0' && list[i] <= '9'; ++i) {
      if (i - start == 9) return false;
      *v = *v * 10 + static_cast<uint64_t>(list[i] - '0');
    }
    return i > start;
  };
  uint64_t count = 0;
  while (true) {
    uint64_t first = 0, last = 0;
    if (!number(&first)) return 0;
    last = first;
    if (i < list.size() && list[i] == '-') {
      ++i;
      if (!number(&last) || last < first) return 0;
    }
    count += last - first + 1;
    if (i == list.size()) return count;
    if (list[i] != ',') return 0;
    ++i;
  }
}

bool UnderHypervisor() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool under = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx >> 31) != 0;
  }();
  return under;
#else
  return false;
#endif
}

uint64_t StreamingThresholdFor(uint64_t bytes, uint64_t sharers, bool virtualized) {
  uint64_t share = bytes / (sharers > 0 ? sharers : 1);
  if (virtualized && share > kVirtualCpuCacheShareBytes) share = kVirtualCpuCacheShareBytes;
  share = share / 4 * 3;
  return share > (uint64_t{1} << 20) ? share : uint64_t{1} << 20;
}

uint64_t LastLevelCacheBytes() { return CachedLastLevel().bytes; }

uint64_t LastLevelCacheSharers() { return CachedLastLevel().sharers; }

uint64_t StreamingThresholdBytes() { return CachedLastLevel().threshold; }

OutStores StoresFor(uint64_t output_bytes) {
  return output_bytes > StreamingThresholdBytes() ? OutStores::kStreaming : OutStores::kCached;
}

void ZeroFloats(float* out, uint64_t n, OutStores stores) {
#if defined(__SSE2__)
  if (stores == OutStores::kStreaming) {
    uint64_t i = 0;
    for (; i < n && (reinterpret_cast<uintptr_t>(out + i) & 63) != 0; ++i) out[i] = 0.0f;
    const __m128 zero = _mm_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      for (uint64_t q = i; q < i + 16; q += 4) _mm_stream_ps(out + q, zero);
    }
    for (; i < n; ++i) out[i] = 0.0f;
    StreamingFence();
    return;
  }
#endif
  std::memset(out, 0, n * sizeof(float));
}

void StreamingFence() {
#if defined(__SSE2__)
  __builtin_ia32_sfence();  // _mm_sfence()
#endif
}

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire
