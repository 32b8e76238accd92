#!/bin/bash
# The sparse exchanges on links without bursts (tools/emulated_cluster.py's
# htb-fair, 20 Mbit/s): their time in transport calls against their bytes
# at the link's rate. Gloo moves a block once the receiver's go-ahead has
# come, over the pair's one connection; a rank that posted its send before
# its receive queued that go-ahead behind its own block, and the two blocks
# crossed one after the other:
#   2 hosts, 4M floats at 1 %, every exchange within 1.3 x: the sparse
#     allreduce's reduce-scatter (AlltoallvBounded) took 139-141 ms for
#     89 ms of bytes with its sends first, 96.5 ms with its receives first;
#   4 hosts (sharing the two cores, so they arrive at different times),
#     16M floats at 0.1 %, the sparse allgather (DirectAllgatherv) within
#     1.35 x: 1.63-1.76 x with its sends first, 1.14-1.16 x after (in a
#     fastbuild with its sends first, 1.69 x here and 1.72 x on 2 hosts).
# The time held to the bar is the transfer proper (less the agreement
# rounds that wait for the last rank), the slowest rank's, median over the
# iterations; a case passes if one of three runs is within its bar. The
# crossing costs every iteration of every run; this shared VM stalls some
# runs whole (on 2026-12-02 the 2-host allreduce took 116-125 ms in 3 of
# 24 runs here, and 135.5 ms in CI), and a stalled run is no evidence of it.
# Put back to sends first (2026-12-02, fastbuild), all three runs over:
# the 2-host allreduce 134-137 ms, the 4-host allgather 237-246 ms.
# Live as root (network namespaces); SKIPPED otherwise.
set -euo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
if ! can="$(python3 "$here/tools/emulated_cluster.py" check)"; then
  echo "SKIPPED fair_link_exchange_test: $can"
  exit 0
fi
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
# attempt NAME HOSTS ELEMENTS DENSITY BAR EXCHANGE...: one run of
# scaling_bench.py; fails unless each named exchange's transfer time is
# within BAR x its bytes' time at the link's rate.
attempt() {
  local name="$1" hosts="$2" elements="$3" density="$4" bar="$5"
  shift 5
  local out="$tmp/$name"
  rm -rf "$out"
  if ! "${GRADWIRE_PYTHON:-/usr/bin/python3}" "$here/tools/scaling_bench.py" --out "$out" \
      --hosts "$hosts" --link 20mbit --elements "$elements" --buckets 1 \
      --densities "$density" --iters 5 --warmup 1 --skip_dense --shaper htb-fair \
      --rank_binary "$here/tools/scaling_rank" > "$out.log" 2>&1; then
    cat "$out.log"
    echo "FAIL: $name: scaling_bench.py"
    return 1
  fi
  python3 - "$out/scaling.json" "$bar" "$@" <<'PY'
import json, sys
cases = {c["exchange"]: c for c in json.load(open(sys.argv[1]))["cases"]}
bar, failed = float(sys.argv[2]), 0
for exchange in sys.argv[3:]:
    c = cases[exchange]
    at_rate_ms = max(c["bytes_sent"], c["bytes_received"]) * 8 / 20e6 * 1e3
    transfer = c["transfer_ms_median"]
    ok = transfer <= bar * at_rate_ms
    failed += not ok
    each = ", ".join(f"{ms:.0f}" for ms in c["transfer_ms_all"])
    print(f"{'ok' if ok else 'over'}: P={c['hosts']} {c['name']}: {transfer:.1f} ms of "
          f"transfer (median of {each}), {at_rate_ms:.1f} ms of bytes at 20 Mbit/s "
          f"(bar: {bar} x)")
sys.exit(1 if failed else 0)
PY
}
# check NAME ...: attempt's arguments; up to three runs, one within the bar.
check() {
  for run in 1 2 3; do
    if attempt "$@"; then return 0; fi
    echo "($1: run $run of 3 over the bar)"
  done
  echo "FAIL: $1: three runs over the bar"
  failures=$((failures + 1))
}
check two-hosts 2 4194304 0.01 1.3 sparse_allgather sparse_allreduce
check four-hosts 4 16777216 0.001 1.35 sparse_allgather
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
