#!/bin/bash
# Each extension must export its module init function and nothing else of
# ours: statically linked gradwire/pybind11 code with global visibility
# could interpose on (or be interposed by) torch's libraries in the same
# process. Neither may need a shared library of ours at run time. And the
# core (_gradwire.so, all that gradwire and gradwire.ddp load) must not
# need gRPC, which only the data cache's extension links.
set -euo pipefail
dir="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire/lib/python"
status=0
for name in _gradwire _gradwire_data; do
  so="$dir/$name.so"
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort)
  echo "global dynamic symbols defined by $name.so:"
  echo "$exported"
  if [ "$exported" != "PyInit_$name" ]; then
    echo "FAIL: $name.so should export exactly PyInit_$name" >&2
    status=1
  fi
  # ldd's output is taken whole before grep reads it: with pipefail, a grep
  # that stops early (-q) would fail the pipeline by SIGPIPE to ldd.
  needs=$(ldd "$so")
  if grep -E "libgradwire|bazel-out" <<<"$needs"; then
    echo "FAIL: $name.so links a gradwire library dynamically" >&2
    status=1
  fi
done
# Shared libraries each one needs, directly or not.
grpc='libgrpc|libgpr\.'
if grep -E "$grpc" <<<"$(ldd "$dir/_gradwire.so")"; then
  echo "FAIL: the core extension _gradwire.so needs gRPC" >&2
  status=1
fi
# The same check sees gRPC where it is: in the data cache's extension.
if ! grep -qE "$grpc" <<<"$(ldd "$dir/_gradwire_data.so")"; then
  echo "FAIL: _gradwire_data.so shows no gRPC: is the check still looking?" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo PASS
exit "$status"
