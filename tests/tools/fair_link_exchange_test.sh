#!/bin/bash
# The sparse exchanges on a link without bursts (tools/emulated_cluster.py's
# htb-fair, 20 Mbit/s, 2 hosts): each one's time in transport calls is at
# most 1.25 x its bytes at the link's rate. Gloo moves a block once the
# receiver's go-ahead has come, over the pair's one connection; a rank that
# posted its send before its receive queued that go-ahead behind its own
# block, and the two blocks crossed one after the other: the sparse
# allreduce's wire took 139-141 ms for 89 ms of bytes (receives first:
# 96.5). Live as root (network namespaces); SKIPPED otherwise.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
why="$(GWTOOLS_DIR="$here/tools" python3 - "$here/tools" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import emulated_cluster
ok, why = emulated_cluster.namespaces_available()
print("" if ok else why)
PY
)"
if [ -n "$why" ]; then
  echo "SKIPPED fair_link_exchange_test: $why"
  exit 0
fi
out="${TEST_TMPDIR:-$(mktemp -d)}/fair"
"${GRADWIRE_PYTHON:-/usr/bin/python3}" "$here/tools/scaling_bench.py" --out "$out" \
  --hosts 2 --link 20mbit --elements 4194304 --buckets 1 --densities 0.01 --iters 3 \
  --warmup 1 --skip_dense \
  --shaper htb-fair --rank_binary "$here/tools/scaling_rank" > "$out.log" 2>&1 ||
  { cat "$out.log"; echo "FAIL: scaling_bench.py"; exit 1; }
python3 - "$out/scaling.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
failed = 0
for c in cases:
    at_rate_ms = max(c["bytes_sent"], c["bytes_received"]) * 8 / 20e6 * 1e3
    ok = c["wire_ms"] <= 1.25 * at_rate_ms
    failed += not ok
    print(f"{'ok' if ok else 'FAIL'}: {c['name']}: {c['wire_ms']:.1f} ms in transport calls, "
          f"{at_rate_ms:.1f} ms of bytes at 20 Mbit/s (bar: 1.25 x)")
assert len(cases) == 2, cases
sys.exit(1 if failed else 0)
PY
