// Region frames: the messages of the sparse allreduce (sparse_allreduce.h).
//
// The gradient's index range is cut into one region per rank. A region
// frame carries one region's entries: one rank's contribution to it (the
// sparse reduce-scatter; values in the codec's value type, copied from the
// rank's codec frame bit for bit), the region's survivors of the global
// selection (the allgather; fp32 sums), or the owner's failure notice.
// Byte layout, little endian (normative text: docs/sparse_allreduce.md):
//
//   0   u32  magic "GWRF"
//   4   u8   version (1)
//   5   u8   kind (RegionFrameKind)
//   6   u8   value type (ValueType: fp32, fp16 or bf16)
//   7   u8   layout (RegionLayout)
//   8   u32  region (the owner's rank in the group)
//   12  u32  status (a failure notice's absl::StatusCode; else 0)
//   16  u32  region begin (index of the region's first element)
//   20  u32  region length
//   24  u32  count (values carried)
//   28  u32  reserved (0)
//   32  u64  index bytes
//   40  indices (index bytes) | values (count x the value type's width)
//
// The sender signs the frame with its FrameSigner (the trailer
// follows); a receiver verifies the MAC, then ParseRegionFrame checks
// every field against what it expects before any value is read.
//
// SparCML's rule, per message: WriteRegionFrame stores the entries sparse
// (indices + values) or dense (one value per region element), whichever
// is smaller. A dense frame cannot say "no entry" except by a zero value,
// so the exchange gives zeros no meaning: a zero contribution adds
// nothing, and a zero sum is not a candidate (sparse_allreduce.h).
#ifndef GRADWIRE_LIB_COMM_REGION_FRAME_H_
#define GRADWIRE_LIB_COMM_REGION_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gradwire/lib/codec/wire_format.h"

namespace gradwire {

inline constexpr uint32_t kRegionFrameMagic = 0x46525747;  // bytes "GWRF"
inline constexpr uint8_t kRegionFrameVersion = 1;
inline constexpr size_t kRegionHeaderBytes = 40;
// Regions end below 2^32 (indices are u32, as in codec frames).
inline constexpr uint64_t kMaxRegionEnd = 0xffffffffu;

enum class RegionFrameKind : uint8_t { kContribution = 1, kSurvivors = 2, kFailure = 3 };

// Where a frame's values sit in its region. 1 and 2 equal IndexEncoding's.
enum class RegionLayout : uint8_t {
  // Values only, one per index of an index set both sides derive (random-k:
  // the shared indices that fall in the region), in index order.
  kImplied = 0,
  kRawU32 = 1,       // count u32 indices, relative to the region begin
  kDeltaVarint = 2,  // the same as delta varints (wire_format.h)
  kDense = 3,        // one value per region element: count = region length
};

struct RegionFrameHeader {
  RegionFrameKind kind = RegionFrameKind::kContribution;
  ValueType value_type = ValueType::kFp32;
  RegionLayout layout = RegionLayout::kDense;
  uint32_t region = 0;
  uint32_t status = 0;
  uint64_t begin = 0;
  uint64_t length = 0;
  uint64_t count = 0;
  uint64_t index_bytes = 0;
  uint64_t value_bytes = 0;  // not on the wire: count x the value width
};

// Even regions of [0, n) over p owners: bounds[j] = floor(j n / p), p + 1
// boundaries; lengths differ by at most one (empty where n < p).
void EvenRegions(uint64_t n, int p, std::vector<uint64_t>* bounds);

// Bytes per value of an fp32, fp16 or bf16 value type.
uint64_t ValueBytes(ValueType type);

// The largest frame (without MAC trailer) WriteRegionFrame produces for a
// region of `length` elements holding at most `max_count` entries, sparse
// in `sparse` (kImplied: random-k, exactly max_count values).
uint64_t MaxRegionFrameBytes(RegionLayout sparse, ValueType type, uint64_t length,
                             uint64_t max_count);

// What the entries are: `count` indices relative to the region begin,
// strictly increasing (null for kImplied), and their values, `count`
// values of `type` back to back at `values`.
struct RegionEntries {
  const uint32_t* indices = nullptr;
  const uint8_t* values = nullptr;
  uint64_t count = 0;
};

// Writes a frame of `header`'s kind, value type, region, begin and length
// (the other fields are filled here) into `out`, laid out `sparse` or
// kDense, whichever is smaller (kImplied is never larger than dense).
// Returns the frame's length. `out` must hold MaxRegionFrameBytes.
absl::StatusOr<size_t> WriteRegionFrame(const RegionFrameHeader& header, RegionLayout sparse,
                                        const RegionEntries& entries, absl::Span<uint8_t> out);

// A failure notice of the owner of `region`: no entries, `code` in status.
absl::StatusOr<size_t> WriteRegionFailure(uint32_t region, uint64_t begin, uint64_t length,
                                          uint32_t code, absl::Span<uint8_t> out);

// What a receiver expects of a frame.
struct RegionExpectation {
  RegionFrameKind kind = RegionFrameKind::kContribution;
  bool failure_allowed = false;  // a kFailure notice is acceptable too
  ValueType value_type = ValueType::kFp32;
  RegionLayout sparse = RegionLayout::kDeltaVarint;  // the one sparse layout allowed
  uint32_t region = 0;
  uint64_t begin = 0;
  uint64_t length = 0;
  uint64_t max_count = 0;      // sparse layouts: at most this many entries
  uint64_t implied_count = 0;  // kImplied: exactly this many values
};

struct RegionFrameView {
  RegionFrameHeader header;
  absl::Span<const uint8_t> values;  // count values of the value type
};

// Checks `frame` completely against `want` (magic, version, kind, type,
// layout, region, begin, length, count, reserved field, section lengths,
// and for sparse
// layouts every index: below the region length and strictly increasing)
// and returns a view. Sparse layouts' indices are decoded into *indices
// (resized to count); other layouts leave it empty. InvalidArgument naming
// the field on any violation; nothing is read past the frame.
absl::StatusOr<RegionFrameView> ParseRegionFrame(absl::Span<const uint8_t> frame,
                                                 const RegionExpectation& want,
                                                 std::vector<uint32_t>* indices);

}  // namespace gradwire

#endif  // GRADWIRE_LIB_COMM_REGION_FRAME_H_
