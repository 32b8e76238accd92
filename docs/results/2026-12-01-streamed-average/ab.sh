#!/bin/bash
# A/B: before/after codec_bench, alternating, pinned to core 1, caches cold.
set -eu
out=${1:?usage: ab.sh OUT_DIR}; rounds=${ROUNDS:-3}
mkdir -p "$out"
for round in $(seq 1 $rounds); do
  for side in before after; do
    bin=$([ $side = before ] && echo "$BEFORE" || echo "$AFTER")
    taskset -c 1 "$bin" --cold --benchmark_min_time=0.2 \
      --benchmark_filter="${FILTER:-DecodeAverage4/(topk|approx_topk)}" --benchmark_color=false \
      --summary_json="$out/$side.$round.json" > "$out/$side.$round.txt" 2>&1
  done
done
