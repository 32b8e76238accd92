#!/bin/bash
# Bazel entry point of planner_exchange_test.py: Debian's python3 (the
# interpreter _gradwire.so is built for), or $GRADWIRE_PYTHON.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
exec "${GRADWIRE_PYTHON:-/usr/bin/python3}" "$here/tests/tools/planner_exchange_test.py" \
  --package_dir "$here/lib/python" --tools_dir "$here/tools"
