#!/bin/bash
# Bazel entry point of emulated_cluster_test.py (plain python3). Needs root
# for its live case (network namespaces); SKIPPED otherwise.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
GWTOOLS_DIR="$here/tools" exec python3 "$here/tests/tools/emulated_cluster_test.py" "$@"
