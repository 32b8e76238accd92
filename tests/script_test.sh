#!/bin/bash
# Runs a script test (defs.bzl's gw_script_test): the script is $1, the
# rest are its arguments.
#
# Under the asan config (.bazelrc sets GRADWIRE_ASAN), the
# interpreters a script runs (bash, Debian's python3) were built without
# the sanitizer, while the extension modules and tools they load were built
# with it. ASan refuses to start unless its runtime comes first in the
# process, so the runtime is preloaded here, with libstdc++ (ASan's
# __cxa_throw interceptor needs it already loaded). Leak reports are off
# for these processes: the interpreter does not free its own memory at
# exit. The C++ tests report leaks as before.
set -euo pipefail
script="$1"
shift
# The path of runtime library $1, from the compiler that built the tests.
runtime() {
  local path
  path="$(gcc -print-file-name="$1" 2>/dev/null || true)"
  if [ ! -e "$path" ]; then
    echo "script_test.sh: cannot find $1 (gcc -print-file-name) for the sanitizer config" >&2
    exit 1
  fi
  echo "$path"
}
if [ -n "${GRADWIRE_ASAN:-}" ]; then
  asan="$(runtime libasan.so)"
  stdcxx="$(runtime libstdc++.so.6)"
  export LD_PRELOAD="$asan $stdcxx${LD_PRELOAD:+ $LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
exec bash "$script" "$@"
