#!/bin/bash
# The extension must export its module init function and nothing else of
# ours: statically linked gradwire/pybind11 code with global visibility
# could interpose on (or be interposed by) torch's libraries in the same
# process.
set -euo pipefail
so="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire/lib/python/_gradwire.so"
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort)
echo "global dynamic symbols defined by _gradwire.so:"
echo "$exported"
if [ "$exported" != "PyInit__gradwire" ]; then
  echo "FAIL: expected exactly PyInit__gradwire" >&2
  exit 1
fi
# And it must not need a shared library of ours at run time.
if ldd "$so" | grep -E "libgradwire|bazel-out"; then
  echo "FAIL: links a gradwire library dynamically" >&2
  exit 1
fi
echo PASS
