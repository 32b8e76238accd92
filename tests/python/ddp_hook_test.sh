#!/bin/bash
# Bazel entry point of ddp_hook_test.py. Runs with Debian's python3 (the
# interpreter python3-torch is installed for; the python3 first on PATH may
# be another), or $GRADWIRE_PYTHON.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
python="${GRADWIRE_PYTHON:-/usr/bin/python3}"
exec "$python" "$here/tests/python/ddp_hook_test.py" --python "$python" \
  --launch "$here/tools/launch.py" "$@"
