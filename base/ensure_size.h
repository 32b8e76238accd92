// Reused scratch buffers: grown to the size a call needs, never shrunk, so
// that a steady state of calls allocates nothing.
#ifndef GRADWIRE_BASE_ENSURE_SIZE_H_
#define GRADWIRE_BASE_ENSURE_SIZE_H_

#include <cstddef>
#include <vector>

namespace gradwire {

// Grows *v to at least n elements (new ones value-initialized); a larger
// *v keeps its size and contents.
template <typename T>
void EnsureSize(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

}  // namespace gradwire

#endif  // GRADWIRE_BASE_ENSURE_SIZE_H_
