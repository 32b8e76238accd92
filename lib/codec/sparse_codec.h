// Sparse codecs: exact top-k, approximate top-k and random-k
// (kernels/cpu/topk.h, kernels/cpu/randomk.h). k = spec.SelectedCount(n)
// values in spec.values (fp32/fp16/bf16); top-k frames carry the indices
// in spec.indices (raw u32 or delta-varint), random-k frames carry none:
// the receiver derives them from the frame's (seed, step), and refuses a
// frame whose seed is not its own spec's.
//
// DecodeAverage's scratch: P decoded lists of k u32s, except on the host
// for top-k frames with delta-varint indices whose lists would take more
// than 8 MiB (16 frames of 25.6M elements at 10 %: 164 MB) or hold more
// than one index in 16 elements: those are checked by a scan that keeps
// no indices and averaged as their indices are decoded (no list at all:
// kernels::DeltaVarintAverage). Random-k frames of one step on the host
// need no lists.
#ifndef GRADWIRE_LIB_CODEC_SPARSE_CODEC_H_
#define GRADWIRE_LIB_CODEC_SPARSE_CODEC_H_

#include <memory>

#include "gradwire/lib/codec/codec.h"

namespace gradwire {

// `spec` is valid and its method is kTopK, kApproxTopK or kRandomK.
std::unique_ptr<Codec> NewSparseCodec(const CompressionSpec& spec);

namespace codec_internal {

// How the host averages delta-varint frames: as chosen (kWholeListsMaxBytes
// and kWholeListsMinSpacing in sparse_codec.cc), or one way forced.
enum class HostAverageWay { kChosen, kWholeLists, kAsDecoded };

// Sets the way and returns the one it replaced: tests run small frames
// both ways. Tests only; not thread-safe.
HostAverageWay SetHostAverageWayForTesting(HostAverageWay way);

}  // namespace codec_internal

}  // namespace gradwire

#endif  // GRADWIRE_LIB_CODEC_SPARSE_CODEC_H_
