#!/bin/bash
# Ranks of a C++ job (exchange_bench through Communicator::Connect) given
# different specs fail together at connect, naming both values: before,
# they connected and failed at their first exchange with "collective
# mismatch: rank 0 called allgather; rank 1 called allreduce_ring_sealed",
# which named neither spec. The same job with one spec runs.
set -uo pipefail
here="${TEST_SRCDIR:-$(dirname "$0")/../..}/gradwire"
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/settings_mismatch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
printf '256x1024\n64\n' > "$tmp/profile"
printf '#!/bin/sh\nratio=0.01\n[ "$RANK" = 1 ] && ratio="$1"\nexec "%s" --profile_file="%s" --iters=1 --warmup=0 --timeout_ms=20000 --spec="topk:ratio=$ratio"\n' \
  "$here/tools/exchange_bench" "$tmp/profile" > "$tmp/rank.sh"
chmod +x "$tmp/rank.sh"
export GRADWIRE_JOB_SECRET=0123456789abcdef0123456789abcdef
failures=0
out="$(timeout 120 python3 "$here/tools/launch.py" --nproc=2 --timeout=100 -- "$tmp/rank.sh" 0.05 2>&1)"
for rank in 0 1; do
  line="$(echo "$out" | grep "^\[rank $rank\].*collective mismatch in settings at rendezvous")"
  if [[ "$line" != *"spec=topk:ratio=0.01"* || "$line" != *"spec=topk:ratio=0.05"* ]]; then
    echo "FAIL: rank $rank did not name both specs; printed:"; echo "$out" | tail -20
    failures=$((failures + 1))
  fi
done
out="$(timeout 120 python3 "$here/tools/launch.py" --nproc=2 --timeout=100 -- "$tmp/rank.sh" 0.01 2>&1)"
if [ $? -ne 0 ] || [[ "$out" == *mismatch* ]]; then
  echo "FAIL: the same spec on both ranks did not run; printed:"; echo "$out" | tail -20
  failures=$((failures + 1))
fi
[ $failures -eq 0 ] && echo "PASS: different specs refused at connect, naming both; one spec runs"
exit $failures
