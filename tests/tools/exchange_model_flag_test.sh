#!/bin/bash
# exchange_bench --exchange_model: the figures given reach the cost model
# that picks each compressed bucket's exchange. Four ranks, two 1 MiB
# buckets of top-k 5 %: with the defaults (a 10 Gbit/s link) both take the
# sparse allgather; on a 1 MB/s link with free CPU the sparse allreduce's
# fewer bytes win. Every rank's JSON names the exchanges and the agreed
# model; the run's averages come out either way.
set -uo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/exchange_model.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
printf '256x1024\n256x1024\n64\n' > "$tmp/profile"
export GRADWIRE_JOB_SECRET=0123456789abcdef0123456789abcdef
failures=0
slow="bytes_per_second=1e6,seconds_per_round=0,seconds_per_message=0"
slow="$slow,encoded_elements_per_second=1e12,decoded_entries_per_second=1e12"
slow="$slow,streamed_elements_per_second=1e12"
for model in "" "$slow"; do
  name="${model:+slow}"
  name="${name:-defaults}"
  out="$(timeout 120 python3 "$here/tools/launch.py" --nproc=4 --timeout=100 -- \
    "$here/tools/exchange_bench" --profile_file="$tmp/profile" --iters=2 --warmup=1 \
    --bucket_size_mb=1 --timeout_ms=20000 --spec=topk:ratio=0.05 --event_loop_nice=19 \
    --exchange_model="$model" --json_out="$tmp/$name.rank{rank}.json" 2>&1)"
  if [ $? -ne 0 ]; then
    echo "FAIL: $name: the run failed: $out"
    failures=$((failures + 1))
    continue
  fi
  echo "$out" | grep -E "plan:|exchange model:"
done
python3 - "$tmp" <<'PY' || failures=$((failures + 1))
import json, sys
tmp = sys.argv[1]
want = {"defaults": ({"sparse_allgather": 2}, 1.25e9), "slow": ({"sparse_allreduce": 2}, 1e6)}
bad = []
for name, (exchanges, rate) in want.items():
    for rank in range(4):
        r = json.load(open(f"{tmp}/{name}.rank{rank}.json"))
        if r["exchanges"] != exchanges:
            bad.append(f"{name} rank {rank}: exchanges {r['exchanges']}, wanted {exchanges}")
        if r["exchange_model"]["bytes_per_second"] != rate:
            bad.append(f"{name} rank {rank}: model {r['exchange_model']}, wanted {rate} bytes/s")
        if r["compressed_buckets"] != 2 or r["iters"] != 2:
            bad.append(f"{name} rank {rank}: {r['compressed_buckets']} compressed buckets")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ $failures -eq 0 ] && echo "PASS: the given model picks the exchanges and is reported"
exit $failures
