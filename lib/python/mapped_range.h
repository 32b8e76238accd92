// Whether an address a Python caller passed as an integer
// (Communicator.allreduce_mean_ptr's data_ptr) names memory this process
// may read and write, checked before anything touches it: a wrong address
// is then an InvalidArgumentError, not a crash.
//
// What it cannot check: that the memory is the caller's float32 data. A
// freed tensor whose pages are still mapped passes, and so does memory
// another thread unmaps between the check and the exchange.
#ifndef GRADWIRE_LIB_PYTHON_MAPPED_RANGE_H_
#define GRADWIRE_LIB_PYTHON_MAPPED_RANGE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace gradwire {
namespace python {

// OK if every byte of [address, address + bytes) lies in mappings of this
// process that are both readable and writable (bytes == 0: always OK).
// Otherwise InvalidArgument naming the first byte that is not, and why:
// not mapped, or its mapping's permissions (read-only, PROT_NONE: the
// reservations a CUDA runtime makes for device memory are). A range that
// wraps past the end of the address space is refused too.
//
// Linux: one PROCMAP_QUERY ioctl on /proc/self/maps per mapping the range
// crosses (a few microseconds; kernels from 6.11), else one read of
// /proc/self/maps (about 2 ms in a process that has imported torch).
// FailedPrecondition where /proc/self/maps cannot be read (no procfs):
// nothing can be checked, so nothing is trusted.
absl::Status CheckReadWritableRange(uintptr_t address, uint64_t bytes);

// The same with the ioctl turned off (tests: the fallback's answers).
absl::Status CheckReadWritableRangeByParsing(uintptr_t address, uint64_t bytes);

}  // namespace python
}  // namespace gradwire

#endif  // GRADWIRE_LIB_PYTHON_MAPPED_RANGE_H_
