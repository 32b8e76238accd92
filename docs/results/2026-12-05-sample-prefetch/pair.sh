#!/bin/bash
# pair.sh OUT PAIRS OLD NEW ROWREGEX...: for each row, PAIRS pairs of codec_bench processes
# (binaries OLD and NEW copied into the working directory; which goes first alternates), one
# repetition each, cold, one core, into OUT/BIN-ROW-pP.json. MINTIME (default 0.2) sets
# --benchmark_min_time.
out=$1; pairs=$2; old=$3; new=$4; shift 4
mkdir -p $out
for row in "$@"; do
  for p in $(seq 1 $pairs); do
    if [ $((p % 2)) = 1 ]; then order="$old $new"; else order="$new $old"; fi
    for b in $order; do
      taskset -c 1 ./$b --cold --benchmark_color=false --benchmark_filter="$row" --benchmark_min_time=${MINTIME:-0.2} --benchmark_out=$out/$b-$(echo $row | tr -c 'a-z0-9' _)-p$p.json --benchmark_out_format=json > /dev/null 2>&1
    done
  done
  echo "$(date -u +%T) $row done"
done
