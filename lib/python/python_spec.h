// Compression specs as Python callers give them.
//
// CompressionSpec::Parse accepts every setting with every method (its
// canonical form, ToString, names them all, used or not). From Python a
// setting the method does not use is a mistake worth hearing about
// ("sign:ratio=0.01": sign keeps no ratio; "topk:ratio=0.01,bits=4": top-k
// does not quantize), so ParseSpec refuses it, unless the text is a
// canonical spec (Communicator.spec, a checkpoint's), which names every
// setting by design.
#ifndef GRADWIRE_LIB_PYTHON_PYTHON_SPEC_H_
#define GRADWIRE_LIB_PYTHON_PYTHON_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gradwire/lib/codec/compression_spec.h"

namespace gradwire {
namespace python {

// CompressionSpec::Parse, then InvalidArgument for a setting `method`
// does not use, naming the ones it does.
absl::StatusOr<CompressionSpec> ParseSpec(absl::string_view text);

// The spec keys (ratio, bits, bucket, ef, seed, values, indices) whose
// settings `method`'s codec reads.
std::vector<std::string> SettingsOf(Method method);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_PYTHON_SPEC_H_
