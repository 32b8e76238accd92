#!/bin/bash
# The three sealed-forged scenarios of transport_test, N times each, under TSan with two
# CPU hogs; prints how many runs had a TSan report. Needs a tsan build in /tmp/san:
#   bazel build --config=tsan //tests/transport:transport_test
cd /tmp/san/bazel-bin/tests/transport/transport_test.runfiles/gradwire
N=${1:-6}; tag=${2:-x}
yes > /dev/null & h1=$!; yes > /dev/null & h2=$!
reports=0; runs=0
for i in $(seq 1 $N); do
  for spec in "3 tamper 0" "4 key 2" "2 key 1"; do
    set -- $spec
    GRADWIRE_TIMEOUT_MS=10000 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/transport/tsan.supp" timeout 100 /usr/bin/python3 tools/launch.py --nproc=$1 --timeout=60 -- tests/transport/transport_rank sealed_forged kind=$2 culprit=$3 timeout_ms=3000 > /tmp/sl_${tag}_${i}_$1.log 2>&1
    runs=$((runs+1)); grep -q ThreadSanitizer /tmp/sl_${tag}_${i}_$1.log && reports=$((reports+1))
  done
done
kill $h1 $h2
echo "$tag: $reports of $runs runs had a TSan report"
