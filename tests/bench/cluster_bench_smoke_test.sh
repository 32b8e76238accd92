#!/bin/bash
# CI smoke of the README's benchmark (tools/benchmark.sh): 2 emulated hosts
# (loopback when namespaces are unavailable), a 1M-float synthetic profile,
# 3 iterations, dense and top-k 1 % flat and hierarchical; asserts the JSON's
# figures are sane (bytes, shapes of the result, plot), never timings.
set -euo pipefail
here="${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin/tests/bench/cluster_bench_smoke_test.runfiles}/gradwire"
out="${TEST_TMPDIR:-$(mktemp -d)}/bench"
py="${GRADWIRE_PYTHON:-/usr/bin/python3}"
[ -x "$py" ] || py=python3
peers="none,powersgd4"
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "SKIPPED: PyTorch DDP peers (python3-torch is not installed)"
  peers=""
fi
methods="none;topk:ratio=0.01"
"$py" "$here/tools/cluster_bench.py" --exchange_bench "$here/tools/exchange_bench" \
  --hosts 2 --params 1000000 --iters 3 --warmup 1 \
  --methods "$methods" --hierarchical both --peers "$peers" \
  --timeout_ms 30000 --case_timeout_s 90 --out_dir "$out" --name smoke
exec "$py" "$here/tests/bench/check_bench_json.py" "$out/smoke.json" --png "$out/smoke.png" \
  --methods "$methods" --hierarchical both --peers "$peers"
