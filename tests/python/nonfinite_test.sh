#!/bin/bash
# Bazel entry point of nonfinite_test.py, with Debian's python3 (python3-torch's)
# or $GRADWIRE_PYTHON.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
python="${GRADWIRE_PYTHON:-/usr/bin/python3}"
exec "$python" "$here/tests/python/nonfinite_test.py" --package_dir "$here/lib/python" \
  --python "$python" "$@"
