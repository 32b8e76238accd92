#!/bin/bash
# Bazel entry point of cluster_bench_failure_test.py (Debian's python3, which
# has matplotlib for the PNG; plain python3 where it is missing).
set -euo pipefail
here="${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin/tests/bench/cluster_bench_failure_test.runfiles}/gradwire"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$here/tests/bench/cluster_bench_failure_test.py" --tools "$here/tools" \
  --exchange_bench "$here/tools/exchange_bench"
