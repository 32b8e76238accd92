// Per-element SGD-with-momentum math shared by the CPU reference
// (kernels/cpu/fused_sgd.h) and the CUDA kernel (kernels/cuda/fused_sgd.h).
//
// Both sides must produce the same bits, so every operation rounds once and
// nothing is contracted into a fused multiply-add: on the device the
// explicit __fmul_rn/__fadd_rn intrinsics forbid contraction, on the host
// -std=c++17 (ISO mode) keeps gcc's -ffp-contract off.
#ifndef GRADWIRE_KERNELS_SGD_MATH_H_
#define GRADWIRE_KERNELS_SGD_MATH_H_

#if defined(__CUDACC__)
#define GRADWIRE_SGD_HD __host__ __device__ __forceinline__
#else
#define GRADWIRE_SGD_HD inline
#endif

namespace gradwire {
namespace kernels {

// Hyper-parameters of one step; the same meaning as torch.optim.SGD.
struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;  // 0: plain SGD, no momentum buffer is touched
  float dampening = 0.0f;
  float weight_decay = 0.0f;  // L2 term added to the gradient
  bool nesterov = false;
  // The first step initializes the momentum buffer with the gradient
  // (torch's "buf is None"), so callers need not zero it.
  bool first_step = false;
};

namespace sgd_detail {
GRADWIRE_SGD_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
GRADWIRE_SGD_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
GRADWIRE_SGD_HD float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
}  // namespace sgd_detail

// Updates one parameter (and its momentum buffer, when momentum != 0):
//   d   = g + wd * p
//   buf = first ? d : mu * buf + (1 - dampening) * d
//   d   = nesterov ? d + mu * buf : buf
//   p   = p - lr * d
GRADWIRE_SGD_HD void SgdUpdate(const SgdOptions& o, float g, float* p, float* buf) {
  using namespace sgd_detail;
  float d = g;
  if (o.weight_decay != 0.0f) d = Add(d, Mul(o.weight_decay, *p));
  if (o.momentum != 0.0f) {
    float b = o.first_step ? d : Add(Mul(o.momentum, *buf), Mul(Sub(1.0f, o.dampening), d));
    *buf = b;
    d = o.nesterov ? Add(d, Mul(o.momentum, b)) : b;
  }
  *p = Sub(*p, Mul(o.lr, d));
}

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_SGD_MATH_H_
