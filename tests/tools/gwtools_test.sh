#!/bin/bash
# Bazel entry point of gwtools_test.py (plain python3: no torch, no extension).
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
GWTOOLS_DIR="$here/tools" exec python3 "$here/tests/tools/gwtools_test.py" "$@"
