#!/bin/bash
# Bazel entry point of data_cache_test.py. Runs with Debian's python3 (the
# interpreter _gradwire.so is built for, with numpy), or $GRADWIRE_PYTHON.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
python="${GRADWIRE_PYTHON:-/usr/bin/python3}"
exec "$python" "$here/tests/python/data_cache_test.py" --package_dir "$here/lib/python" \
  --data_server "$here/tools/data_server" "$@"
