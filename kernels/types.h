// The plain types every kernel's signature shares, CPU (kernels/cpu/) and
// CUDA (kernels/cuda/) alike: what a fused compressor observed, the band an
// approximate top-k drew from, and the descriptors of tensors and payloads.
// The same struct describes host memory on the CPU side and device memory
// on the CUDA side (where a CUDA kernel writes one, it lives on the device).
#ifndef GRADWIRE_KERNELS_TYPES_H_
#define GRADWIRE_KERNELS_TYPES_H_

#include <stdint.h>

#include "gradwire/kernels/element_math.h"

namespace gradwire {
namespace kernels {

// Every compress kernel fills one of these when given a non-null pointer.
// Counters are totals for the call, not increments.
struct FusedStats {
  uint64_t selected = 0;   // values written (k for sparse kernels, n otherwise)
  uint64_t nonfinite = 0;  // elements whose acc = grad + residual was NaN or ±Inf
};

// Where top-k's outputs may stay inside its CPU temp (cpu::TopKOutputsInTemp,
// TopKHostOutputsInTemp in dispatch.h).
struct OutputsInTemp {
  uint32_t* indices;
  uint8_t* values;
};

// The magnitude-key band an approximate top-k drew its last elements from:
// selected keys are >= lower_key, unselected keys are < upper_key.
struct ApproxTopKBand {
  uint32_t lower_key = 0;
  uint32_t upper_key = 0;
  uint64_t above = 0;    // elements with key >= upper_key (all selected)
  uint64_t in_band = 0;  // candidates counted in the band (the CPU version
                         // may not count band elements below its sampled
                         // bound; they are never needed)
};

// One parameter tensor of a fused SGD step: `size` elements of parameters,
// their gradient and their momentum buffer (may be null when momentum == 0).
struct SgdTensor {
  float* param = nullptr;
  const float* grad = nullptr;
  float* momentum = nullptr;
  uint64_t size = 0;
};

// One worker's sparse entries: `count` strictly increasing indices < n and
// as many values stored little endian in `format` at any alignment (the
// layout of a frame's sections; see element_math.h LoadValue).
struct SparsePayload {
  const uint32_t* indices = nullptr;
  const uint8_t* values = nullptr;
  uint64_t count = 0;
  ValueFormat format = ValueFormat::kFp32;
};

// One worker's sparse entries as a frame carries them with delta-varint
// indices (docs/wire_format.md, "Indices"): `count` indices coded in
// `index_bytes` as LEB128 varints (the first index, then each gap minus
// one) and as many values as SparsePayload's.
struct DeltaVarintPayload {
  const uint8_t* index_bytes = nullptr;
  uint64_t index_byte_count = 0;
  const uint8_t* values = nullptr;
  uint64_t count = 0;
  ValueFormat format = ValueFormat::kFp32;
};

// How a sum of payloads into a dense buffer starts and ends.
struct SparseSumOptions {
  // Start from dense's old contents (true) or from zero (false).
  bool accumulate = false;
  // Multiplies each finished sum: 1 sums, 1/P averages (one rounding).
  float scale = 1.0f;
};

// One worker's quantized sections, laid out as kernels/cpu/quantize.h
// writes them.
struct QuantizedPayload {
  const uint8_t* scales = nullptr;  // BucketCount(n, bucket_size) fp32, little endian
  const uint8_t* packed = nullptr;  // PackedBytes(n, bits)
};

struct QuantizedFormat {
  bool sign = false;  // true: SignDecode (bits must be 1); false: QSGD
  uint32_t bits = 4;
  uint32_t bucket_size = 512;
};

}  // namespace kernels
}  // namespace gradwire

#endif  // GRADWIRE_KERNELS_TYPES_H_
