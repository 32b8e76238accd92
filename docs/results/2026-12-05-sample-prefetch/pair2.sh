#!/bin/bash
# pair2.sh OUT PAIRS ROWREGEX...: as pair.sh, for binaries cb_A (main at 7f47717) and cb_B (the scatter prefetch); MINTIME (default 0.2) sets --benchmark_min_time
out=$1; pairs=$2; shift 2
mkdir -p $out
for row in "$@"; do
  for p in $(seq 1 $pairs); do
    if [ $((p % 2)) = 1 ]; then order="cb_A cb_B"; else order="cb_B cb_A"; fi
    for b in $order; do
      taskset -c 1 ./$b --cold --benchmark_color=false --benchmark_filter="$row" --benchmark_min_time=${MINTIME:-0.2} --benchmark_out=$out/$b-$(echo $row | tr -c 'a-z0-9' _)-p$p.json --benchmark_out_format=json > /dev/null 2>&1
    done
  done
  echo "$(date -u +%T) $row done"
done
