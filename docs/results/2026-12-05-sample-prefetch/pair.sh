#!/bin/bash
# pair.sh OUT PAIRS ROWREGEX... : for each row, PAIRS times: cb_head then cb_sample (order alternating), one repetition each
out=$1; pairs=$2; shift 2
mkdir -p $out
for row in "$@"; do
  for p in $(seq 1 $pairs); do
    if [ $((p % 2)) = 1 ]; then order="cb_head cb_sample"; else order="cb_sample cb_head"; fi
    for b in $order; do
      taskset -c 1 ./$b --cold --benchmark_color=false --benchmark_filter="$row" --benchmark_min_time=0.2 --benchmark_out=$out/$b-$(echo $row | tr -c 'a-z0-9' _)-p$p.json --benchmark_out_format=json > /dev/null 2>&1
    done
  done
  echo "$(date -u +%T) $row done"
done
