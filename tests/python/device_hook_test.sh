#!/bin/bash
# Bazel entry point of device_hook_test.py, with Debian's python3 (torch).
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
python="${GRADWIRE_PYTHON:-/usr/bin/python3}"
exec "$python" "$here/tests/python/device_hook_test.py" --package_dir "$here/lib/python" "$@"
