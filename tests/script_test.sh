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
#
# Under the tsan config (GRADWIRE_TSAN), a TSan-built extension cannot be
# dlopen'ed by an interpreter started without TSan ("cannot allocate memory
# in static TLS block"), so Python starts through a wrapper
# ($GRADWIRE_PYTHON, which every script test's python honours) that
# preloads TSan's runtime; the Pythons it spawns inherit the preload. (bash
# and sh crash with TSan preloaded: the scripts themselves run without.)
# Debian's torch, gRPC and absl are not instrumented: TSan sees only the
# interceptors they call, not their synchronization, and reported races
# between torch's own threads (ProcessGroupGloo destroying a condition
# variable its worker thread signalled): a report with a frame in one of
# those libraries is suppressed; one between frames of ours is not.
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
if [ -n "${GRADWIRE_TSAN:-}" ]; then
  tsan="$(runtime libtsan.so)"
  dir="${TEST_TMPDIR:?}/tsan-python"
  mkdir -p "$dir"
  for lib in libtorch_cpu.so libtorch_python.so libc10.so libgomp.so libgrpc.so libgrpc++.so \
             libgpr.so libabsl_; do
    echo "race:$lib"
  done > "$dir/tsan.supp"
  # A Python script, not a shell one: a Python child of a preloaded
  # Python inherits the preload, which a shell would not survive.
  printf '%s\n' '#!/usr/bin/python3' 'import os, sys' \
    "os.environ['LD_PRELOAD'] = '$tsan'" \
    "os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv[1:])" > "$dir/python3"
  chmod +x "$dir/python3"
  export GRADWIRE_PYTHON="$dir/python3"
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }suppressions=$dir/tsan.supp"
fi
exec bash "$script" "$@"
