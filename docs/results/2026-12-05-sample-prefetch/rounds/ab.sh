#!/bin/bash
# ab.sh OUT ROUNDS FILTER BIN...: runs codec_bench binaries (copied into this folder) alternately,
# round by round, cold, one core, median of 3 repetitions, into OUT/BIN-rN.json.
out=$1; rounds=$2; filter=$3; shift 3
mkdir -p $out
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    taskset -c 1 ./$b --cold --benchmark_color=false --benchmark_filter="$filter" --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out=$out/$b-r$r.json --benchmark_out_format=json > /dev/null 2>&1
    echo "$(date -u +%T) $b r$r done"
  done
done
