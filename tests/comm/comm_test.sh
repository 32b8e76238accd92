#!/bin/bash
# Bazel entry point of comm_test.py (a plain python3 script: Debian's
# python3, no Bazel Python toolchain needed).
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/..}/gradwire"
exec python3 "$here/tests/comm/comm_test.py" \
  --launch "$here/tools/launch.py" --rank "$here/tests/comm/comm_rank" "$@"
