// The data cache's part of the _gradwire extension (lib/cache/ for Python):
// DataCache over a packed directory or a data server, a prefetching reader
// over a given key order, the shuffled epoch order, and the packer.
// Kept thin: lib/cache's headers are the contract; this only converts
// types, releases the GIL around I/O and turns Status into exceptions.
#ifndef GRADWIRE_LIB_PYTHON_DATA_CACHE_BINDING_H_
#define GRADWIRE_LIB_PYTHON_DATA_CACHE_BINDING_H_

#include <pybind11/pybind11.h>

namespace gradwire {
namespace python {

// Adds DataCache, Prefetcher, epoch_order and pack_dataset to `m`
// (errors as status_exception.h maps them; DefineErrorType first).
void DefineDataCache(pybind11::module_& m);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_DATA_CACHE_BINDING_H_
