#!/bin/bash
# exchange_bench --timeline_out: two ranks write one Chrome trace each, with
# every timed step and, per bucket, its stages in pipeline order;
# tools/timeline_summary.py reads them (per-rank medians, JSON, a merged
# trace) and refuses files that are not such traces with one line naming
# the file, never a traceback.
set -uo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/timeline.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Two compressed buckets (256 x 1024 each, 1 MiB buckets) and a dense one.
printf '256x1024\n256x1024\n64\n' > "$tmp/profile"
export GRADWIRE_JOB_SECRET=0123456789abcdef0123456789abcdef
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
out="$(timeout 120 python3 "$here/tools/launch.py" --nproc=2 --timeout=100 -- \
  "$here/tools/exchange_bench" --profile_file="$tmp/profile" --iters=3 --warmup=1 \
  --bucket_size_mb=1 --timeout_ms=20000 --spec=topk:ratio=0.01 \
  --timeline_out="$tmp/trace.rank{rank}.json" 2>&1)" || fail "the run failed: $out"
summary="$(python3 "$here/tools/timeline_summary.py" "$tmp"/trace.rank*.json \
  --json "$tmp/summary.json" --merge "$tmp/all.json" 2>&1)" || fail "summary failed: $summary"
echo "$summary"
# Rank 0's median step on every rank, one clock: both ranks' step and stages.
every="$(sed -n '/on every rank, ms from/,$p' <<<"$summary")"
for rank in 0 1; do
  for stage in step encode transfer exchange finish; do
    grep -Eq "^  rank +$rank bucket +[0-9]* $stage " <<<"$every" ||
      fail "no rank $rank $stage line in the every-rank step: $every"
  done
done
python3 - "$tmp" <<'PY' || failures=$((failures + 1))
import json, sys
tmp = sys.argv[1]
bad = []
for rank in (0, 1):
    events = json.load(open(f"{tmp}/trace.rank{rank}.json"))["traceEvents"]
    steps = {e["args"]["step"] for e in events if e.get("name") == "step"}
    if steps != {1, 2, 3}:
        bad.append(f"rank {rank}: timed steps {sorted(steps)}, wanted 1-3 (after one warm-up)")
    for step in steps:
        got = {}
        for e in events:
            if e.get("ph") in ("X", "i") and e["name"] != "step" and e["args"]["step"] == step:
                got.setdefault(e["args"]["bucket"], []).append((e["ts"], e["name"]))
        stages = sorted(tuple(n for _, n in sorted(v)) for v in got.values())
        want = sorted([("queued", "encode", "transfer", "finish")] * 2
                      + [("queued", "exchange", "finish")])
        if stages != want:
            bad.append(f"rank {rank} step {step}: stages {stages}")
rows = json.load(open(f"{tmp}/summary.json"))["ranks"]
if [r["rank"] for r in rows] != [0, 1] or any(r["steps"] != 3 for r in rows):
    bad.append(f"summary rows {rows}")
for r in rows:
    if not 0 < r["encode"] + r["finish"] <= r["step"] or not 0 < r["exchange"] <= r["step"]:
        bad.append(f"rank {r['rank']}: stage times outside the step: {r}")
merged = json.load(open(f"{tmp}/all.json"))["traceEvents"]
if {e["pid"] for e in merged} != {0, 1}:
    bad.append("the merged trace does not hold both ranks")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# Hostile inputs: one line naming the file, exit status 1.
printf '{"traceEvents": [{"ph": "X", "name": "step", "pid": 0}]}' > "$tmp/noargs.json"
printf 'not json' > "$tmp/text.json"
printf '[1, 2]' > "$tmp/list.json"
printf '{"traceEvents": []}' > "$tmp/empty.json"
for f in noargs text list empty missing; do
  out="$(python3 "$here/tools/timeline_summary.py" "$tmp/$f.json" 2>&1)"
  rc=$?
  if [ $rc -ne 1 ] || [[ "$out" != "timeline_summary: "*"$f.json"* ]] || [[ "$out" == *Traceback* ]]
  then
    fail "$f.json: exit $rc, printed: $out"
  fi
done
[ $failures -eq 0 ] && echo "PASS: traces of every timed step and stage; hostile files refused"
exit $failures
