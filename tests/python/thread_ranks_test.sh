#!/bin/bash
# Bazel entry point of thread_ranks_test.py, with Debian's python3 (the
# interpreter the extension is built for), or $GRADWIRE_PYTHON.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
python="${GRADWIRE_PYTHON:-/usr/bin/python3}"
exec "$python" "$here/tests/python/thread_ranks_test.py" --package_dir "$here/lib/python" "$@"
