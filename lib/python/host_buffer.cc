#include "host_buffer.h"

#include <Python.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gradwire/kernels/element_math.h"
#include "status_exception.h"

namespace py = pybind11;

namespace gradwire {
namespace python {
namespace {

// The DLPack ABI (dlpack.h, v0.x: what __dlpack__ returns in a capsule
// named "dltensor" unless a versioned tensor is asked for).
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;  // pinned host memory
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;

std::string TypeName(const py::handle& obj) {
  return py::str(py::type::handle_of(obj).attr("__name__"));
}

// True when `shape` / `strides` (elements) describe a C-contiguous array;
// dimensions of size 1 may have any stride.
template <typename Int>
bool CContiguous(int ndim, const Int* shape, const Int* strides, Int unit) {
  Int expected = unit;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

}  // namespace

uint16_t RoundToHalfBits(float f) {
  const uint32_t x = kernels::FloatBits(f);
  const uint32_t a = x & 0x7fffffffu;
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  if (a > 0x7f800000u) return sign | 0x7e00u;  // NaN: a quiet NaN, as torch's
  // From 65520 (halfway between 65504 and 2^16, which rounds to even:
  // 2^16) up, the nearest half is infinity; gradwire's codecs saturate.
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  return kernels::FloatToHalfBits(f);
}

uint16_t RoundToBfloat16Bits(float f) {
  const uint32_t x = kernels::FloatBits(f);
  const uint32_t a = x & 0x7fffffffu;
  // Finite values from halfway past the largest bfloat16 up round to
  // infinity, where gradwire's codecs saturate. A NaN stays a NaN (the
  // kernels' bits: torch's differ between its versions and code paths).
  if (a >= 0x7f7f8000u && a < 0x7f800000u) {
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7f80u);
  }
  return kernels::FloatToBf16Bits(f);
}

// The Python error's type and message, without the "At:" traceback that
// error_already_set::what() appends.
std::string ErrorText(const py::error_already_set& e) {
  return absl::StrCat(std::string(py::str(e.type().attr("__name__"))), ": ",
                      std::string(py::str(e.value())));
}

HostFloats HostFloats::From(const py::handle& obj, bool writable, const char* what) {
  HostFloats out;
  if (PyObject_CheckBuffer(obj.ptr())) {
    py::buffer_info info;
    try {
      info = py::reinterpret_borrow<py::buffer>(obj).request(writable);
    } catch (py::error_already_set& e) {
      RaiseUnsupported(absl::StrCat(what, ": cannot use this ", TypeName(obj),
                                    writable ? " as a writable buffer: " : ": ", ErrorText(e)));
    }
    Format format;
    if (info.itemsize == 4 && info.format == "f") {
      format = Format::kFloat32;
    } else if (info.itemsize == 2 && info.format == "e") {
      format = Format::kFloat16;
    } else {
      RaiseUnsupported(absl::StrCat(what, " must hold float32, float16 or bfloat16, got ",
                                    TypeName(obj), " of format '", info.format, "' (",
                                    info.itemsize, "-byte items)"));
    }
    if (!CContiguous<py::ssize_t>(static_cast<int>(info.ndim), info.shape.data(),
                                  info.strides.data(), info.itemsize)) {
      RaiseUnsupported(absl::StrCat(what, " must be C-contiguous"));
    }
    const size_t n = static_cast<size_t>(info.size);
    void* raw = info.ptr;
    out.info_.emplace(std::move(info));
    out.Widen(raw, n, format);
    return out;
  }
  if (!py::hasattr(obj, "__dlpack__")) {
    RaiseUnsupported(absl::StrCat(what,
                                  " must be a tensor or array (DLPack or the buffer "
                                  "protocol: torch.Tensor, numpy.ndarray), got ",
                                  TypeName(obj)));
  }
  if (py::hasattr(obj, "__dlpack_device__")) {
    // Ask where it lives before exporting: a CUDA export may synchronize.
    int type = -1;
    try {
      py::tuple device = obj.attr("__dlpack_device__")();
      type = device[0].cast<int>();
    } catch (py::error_already_set& e) {  // torch's meta tensors: "Unknown device type"
      RaiseUnsupported(
          absl::StrCat(what, ": cannot tell where this ", TypeName(obj), " lives: ", ErrorText(e)));
    } catch (py::cast_error&) {
      RaiseUnsupported(absl::StrCat(what, ": ", TypeName(obj),
                                    ".__dlpack_device__() did not give a device type"));
    }
    if (type != kDLCPU && type != kDLCUDAHost) {
      RaiseUnsupported(absl::StrCat(
          what, ": ", type == kDLCUDA ? "CUDA" : absl::StrCat("device type ", type),
          " tensors are not supported until the device path lands; move the tensor to the "
          "CPU (tensor.cpu()) or exchange CPU buckets"));
    }
  }
  try {
    out.owner_ = obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    // torch refuses tensors that require grad ("use tensor.detach()").
    RaiseUnsupported(absl::StrCat(what, ": cannot take this ", TypeName(obj), ": ", ErrorText(e)));
  }
  void* capsule = PyCapsule_GetPointer(out.owner_.ptr(), "dltensor");
  if (capsule == nullptr) {
    PyErr_Clear();
    RaiseUnsupported(
        absl::StrCat(what, ": __dlpack__ of ", TypeName(obj), " returned no \"dltensor\" capsule"));
  }
  // The capsule stays unconsumed (its name unchanged) and owned by
  // owner_: when it dies, its destructor calls the producer's deleter.
  const DLTensor& t = static_cast<DLManagedTensor*>(capsule)->dl_tensor;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    RaiseUnsupported(absl::StrCat(what, ": tensors on device type ", t.device.device_type,
                                  " are not supported until the device path lands; move the "
                                  "tensor to the CPU"));
  }
  Format format;
  if (t.dtype.lanes == 1 && t.dtype.code == kDLFloat && t.dtype.bits == 32) {
    format = Format::kFloat32;
  } else if (t.dtype.lanes == 1 && t.dtype.code == kDLFloat && t.dtype.bits == 16) {
    format = Format::kFloat16;
  } else if (t.dtype.lanes == 1 && t.dtype.code == kDLBfloat && t.dtype.bits == 16) {
    format = Format::kBfloat16;
  } else {
    py::object dtype = py::hasattr(obj, "dtype") ? obj.attr("dtype") : py::str("?");
    RaiseUnsupported(absl::StrCat(what, " must hold float32, float16 or bfloat16, got ",
                                  std::string(py::str(dtype)), " (DLPack type code ",
                                  static_cast<int>(t.dtype.code), ", ",
                                  static_cast<int>(t.dtype.bits), " bits)"));
  }
  size_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  if (t.strides != nullptr && n > 0 && !CContiguous<int64_t>(t.ndim, t.shape, t.strides, 1)) {
    RaiseUnsupported(absl::StrCat(what, " must be contiguous (tensor.contiguous())"));
  }
  out.Widen(static_cast<char*>(t.data) + t.byte_offset, n, format);
  return out;
}

void HostFloats::Widen(void* raw, size_t n, Format format) {
  format_ = format;
  if (format == Format::kFloat32) {
    floats_ = absl::MakeSpan(static_cast<float*>(raw), n);
    return;
  }
  narrow_ = static_cast<uint16_t*>(raw);
  widened_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    widened_[i] = format == Format::kFloat16 ? kernels::HalfBitsToFloat(narrow_[i])
                                             : kernels::Bf16BitsToFloat(narrow_[i]);
  }
  floats_ = absl::MakeSpan(widened_);
}

void HostFloats::WriteBack() {
  if (format_ == Format::kFloat32) return;
  for (size_t i = 0; i < widened_.size(); ++i) {
    narrow_[i] = format_ == Format::kFloat16 ? RoundToHalfBits(widened_[i])
                                             : RoundToBfloat16Bits(widened_[i]);
  }
}

void CopyInto(absl::Span<const float> values, const py::handle& out, const char* what) {
  HostFloats o = HostFloats::From(out, /*writable=*/true, what);
  if (o.size() != values.size()) {
    RaiseInvalid(absl::StrCat(what, " has ", o.size(), " elements, expected ", values.size()));
  }
  std::copy(values.begin(), values.end(), o.floats().begin());
  o.WriteBack();
}

}  // namespace python
}  // namespace gradwire
