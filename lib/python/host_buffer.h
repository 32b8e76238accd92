// Buffers from Python for one call, as float32 in host memory.
//
// Takes, without a copy where the memory already is float32:
//   - anything with the buffer protocol (numpy arrays, memoryview): float32
//     ('f') or float16 ('e'), C-contiguous, writable when written to;
//   - any DLPack producer (__dlpack__: torch tensors, numpy, JAX, CuPy) of
//     float32, float16 or bfloat16, C-contiguous, in host memory.
// No torch C++ ABI is involved: DLPack is a C struct any framework hands
// over, so one build of the extension works with every torch version.
//
// float16 / bfloat16 are widened to a float32 copy (exact), exchanged as
// float32 (error-feedback residuals stay float32), and rounded back into
// the caller's memory by WriteBack: to nearest, ties to even, a finite
// value beyond the format's range becoming infinity, exactly as torch's
// tensor.to(torch.float16 / torch.bfloat16) rounds (a NaN stays a NaN;
// its bits may differ from torch's, which differ between torch versions).
//
// Refused with gradwire.UnsupportedError (a TypeError), naming the
// argument: other dtypes, non-contiguous layouts, device memory (CUDA:
// "until the device path lands; move the tensor to the CPU"), tensors
// that require grad (pass tensor.detach(), which shares the memory).
#ifndef GRADWIRE_LIB_PYTHON_HOST_BUFFER_H_
#define GRADWIRE_LIB_PYTHON_HOST_BUFFER_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace gradwire {
namespace python {

class HostFloats {
 public:
  enum class Format { kFloat32, kFloat16, kBfloat16 };

  // `what` names the argument in errors ("buffer", "out"). Call with the
  // GIL held; the object keeps the memory alive until this is destroyed.
  static HostFloats From(const pybind11::handle& obj, bool writable, const char* what);

  // The float32 elements: the caller's memory, or the widened copy.
  absl::Span<float> floats() { return floats_; }
  size_t size() const { return floats_.size(); }
  Format format() const { return format_; }

  // Rounds the widened copy back into the caller's float16/bfloat16
  // memory; nothing for float32. Needs no GIL.
  void WriteBack();

  // Whether the caller's memory behind this and `other` overlaps (two
  // arguments that are one tensor, or views of one): an exchange writing
  // both would leave whichever was written last.
  bool Overlaps(const HostFloats& other) const {
    const auto [a, a_bytes] = CallerMemory();
    const auto [b, b_bytes] = other.CallerMemory();
    return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
  }

  HostFloats(HostFloats&&) = default;
  HostFloats& operator=(HostFloats&&) = default;

 private:
  HostFloats() = default;
  void Widen(void* raw, size_t n, Format format);
  // The caller's memory: its first byte and length.
  std::pair<const char*, size_t> CallerMemory() const {
    if (narrow_ != nullptr) {
      return {reinterpret_cast<const char*>(narrow_), floats_.size() * sizeof(uint16_t)};
    }
    return {reinterpret_cast<const char*>(floats_.data()), floats_.size() * sizeof(float)};
  }

  pybind11::object owner_;                     // the DLPack capsule, if any
  std::optional<pybind11::buffer_info> info_;  // the buffer-protocol view, if any
  Format format_ = Format::kFloat32;
  uint16_t* narrow_ = nullptr;  // the caller's float16/bfloat16 elements
  std::vector<float> widened_;
  absl::Span<float> floats_;
};

// Copies `values` into `out` (writable, of the same length, any dtype
// HostFloats takes); `what` names out in errors.
void CopyInto(absl::Span<const float> values, const pybind11::handle& out, const char* what);

// torch's rounding of a float to float16 / bfloat16 bits (see above).
uint16_t RoundToHalfBits(float f);
uint16_t RoundToBfloat16Bits(float f);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_HOST_BUFFER_H_
