#!/bin/bash
# usage: ab.sh ROUNDS FILTER BIN...
rounds=$1; filter=$2; shift 2
for r in $(seq $rounds); do
  for b in "$@"; do
    echo "== round $r $(basename $b)"
    taskset -c 1 $b --cold --benchmark_filter="$filter" --benchmark_min_time=0.3 --benchmark_repetitions=3 2>&1 | sed -n '/^vs_memcpy/,$p' | tail -n +3
  done
done
