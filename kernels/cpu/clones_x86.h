// How the CPU kernels build their hot loops for more than one x86-64 level.
//
// A function marked GRADWIRE_CPU_CLONES is compiled several times, for
// x86-64-v4 (AVX-512: sixteen 32-bit lanes), x86-64-v3 (AVX2, FMA, F16C:
// eight 32-bit lanes, pmulld for the element hash) and the baseline, and
// the loader picks the clone the CPU runs (GCC target_clones, an ifunc).
// Helpers it calls are marked GRADWIRE_CPU_INLINE so that each clone gets
// its own copy compiled for its level, and select with SelectBits.
//
// Every clone computes the same bits: the loops use integer operations,
// exact conversions and correctly rounded IEEE + - * / only (no
// reciprocal or other approximations), and the kernels are built with
// -ffp-contract=off (kernels/BUILD.bazel), so no clone contracts a
// multiply and an add into an FMA.
//
// Test builds: GRADWIRE_NO_CPU_CLONES builds the baseline only and
// GRADWIRE_NO_CPU_V4_CLONES leaves out the x86-64-v4 clone, so that tests
// also run the clones this machine's loader would not pick.
#ifndef GRADWIRE_KERNELS_CPU_CLONES_X86_H_
#define GRADWIRE_KERNELS_CPU_CLONES_X86_H_

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(GRADWIRE_NO_CPU_CLONES)
#if defined(GRADWIRE_NO_CPU_V4_CLONES)
#define GRADWIRE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GRADWIRE_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#else
#define GRADWIRE_CPU_CLONES
#endif

#define GRADWIRE_CPU_INLINE __attribute__((always_inline)) inline

// Where a loop needs an instruction that neither GCC's vectorizer nor its
// vector extensions emit (F16C's conversions: GCC 12 splits a vector of
// _Float16 into scalars), or where the portable loop stages its lanes
// through memory that registers can hold (top-k's and random-k's passes:
// topk_wide.h, randomk_wide.h), it is written with intrinsics in a function
// marked GRADWIRE_CPU_V3 (x86-64-v3), beside the portable loop, and taken
// when CpuIsX86V3() (asked once, at the first call). Builds without clones
// (GRADWIRE_NO_CPU_CLONES, or not GCC on x86-64) leave it out; the v3
// test build (GRADWIRE_NO_CPU_V4_CLONES) keeps it. The two must give the
// same bits (NaN payloads aside, as everywhere: see cpu_clones_test.cc).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(GRADWIRE_NO_CPU_CLONES)
#define GRADWIRE_CPU_V3_FUNCTIONS 1
#define GRADWIRE_CPU_V3 __attribute__((target("arch=x86-64-v3")))
#include <immintrin.h>
#else
#define GRADWIRE_CPU_V3_FUNCTIONS 0
#endif

// The same for x86-64-v4 (AVX-512 F, BW, DQ, VL: sixteen 32-bit lanes and
// mask registers), marked GRADWIRE_CPU_V4 and taken when CpuIsX86V4().
// The v3 test build (GRADWIRE_NO_CPU_V4_CLONES) leaves it out, so that
// the v3 loop beside it is tested on machines that have AVX-512 too.
#if GRADWIRE_CPU_V3_FUNCTIONS && !defined(GRADWIRE_NO_CPU_V4_CLONES)
#define GRADWIRE_CPU_V4_FUNCTIONS 1
#define GRADWIRE_CPU_V4 __attribute__((target("arch=x86-64-v4")))
// Around a file's x86-64-v4 functions: GCC 12 warns of the AVX-512
// intrinsics' own _mm512_undefined_*() operands (its bug 105593, fixed in
// GCC 13).
#define GRADWIRE_CPU_V4_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define GRADWIRE_CPU_V4_END _Pragma("GCC diagnostic pop")
#else
#define GRADWIRE_CPU_V4_FUNCTIONS 0
#endif

namespace gradwire {
namespace kernels {
namespace cpu {

// Lanes for loops written with GCC vector extensions: each clone compiles
// them at its own width (two SSE registers for eight lanes in the
// baseline, one AVX register in x86-64-v3).
typedef uint16_t U16x8 __attribute__((vector_size(16)));
typedef uint32_t U32x4 __attribute__((vector_size(16)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));
typedef float F32x8 __attribute__((vector_size(32)));
typedef double F64x4 __attribute__((vector_size(32)));

// Bits of one type as another of the same size (scalars or vectors; a
// builtin, so vectors are not passed through a function's ABI).
#define GRADWIRE_BITCAST(To, from) __builtin_bit_cast(To, from)

// c ? a : b as bit masks. GCC turns a chain of ?: into branches that its
// vectorizer cannot if-convert (and will not speculate a float operation
// past: it might trap); masks keep the loop straight-line.
GRADWIRE_CPU_INLINE uint32_t SelectBits(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// Little-endian words at any alignment (the wire's order): plain loads and
// stores, which vectorize, on a little-endian host.
template <typename T>
GRADWIRE_CPU_INLINE T LoadLe(const uint8_t* p) {
  T v;
  memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if (sizeof v == 2) v = static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  if (sizeof v == 4) v = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  if (sizeof v == 8) v = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
#endif
  return v;
}

template <typename T>
GRADWIRE_CPU_INLINE void StoreLe(uint8_t* p, T v) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  if (sizeof v == 2) v = static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  if (sizeof v == 4) v = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  if (sizeof v == 8) v = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
#endif
  memcpy(p, &v, sizeof v);
}

#if GRADWIRE_CPU_V3_FUNCTIONS
inline bool CpuIsX86V3() {
  static const bool v3 = __builtin_cpu_supports("x86-64-v3");
  return v3;
}
#endif

#if GRADWIRE_CPU_V4_FUNCTIONS
inline bool CpuIsX86V4() {
  static const bool v4 = __builtin_cpu_supports("x86-64-v4");
  return v4;
}
#endif

// No bucket loop prefetches ahead in software (the hardware prefetchers
// follow its streams). Prefetching grad and residual 4096 elements ahead,
// as QSGD's and sign's loops once did, made them slower with caches cold
// on both machines it was measured on: on a Zen 5 core QSGD's x86-64-v4
// loop by 15-30 % and sign's encode 1.7-1.8 times
// (docs/results/2026-11-30-sign-prefetch.md), on a Zen 3 core QSGD's
// x86-64-v3 loop by 12-20 % and sign's encode by 1.3-1.5 times
// (docs/results/2026-11-30-session-gmac.md).

}  // namespace cpu
}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_CPU_CLONES_X86_H_
