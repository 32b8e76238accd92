#!/bin/bash
# The A/B of docs/results/2026-12-01-avx2-loops.md: two codec_bench binaries
# built with the x86-64-v3 loops only (no AVX-512 clone), before (547d30b) and
# after (4c03698), alternating, three rounds, pinned to core 1, caches cold.
#   bazel build -c opt --copt=-DGRADWIRE_NO_CPU_V4_CLONES //bench:codec_bench
# in a clone at each commit; copy each binary to $BEFORE and $AFTER.
set -eu
out=${1:?usage: ab_rounds.sh OUT_DIR}
mkdir -p "$out"
for round in 1 2 3; do
  for side in before after; do
    bin=$([ $side = before ] && echo "$BEFORE" || echo "$AFTER")
    taskset -c 1 "$bin" --cold --benchmark_min_time=0.2 \
      --benchmark_filter='(Encode|DecodeAverage4)/.*ratio=0.1/' --benchmark_color=false \
      --summary_json="$out/$side.$round.json" > "$out/$side.$round.txt" 2>&1
  done
done
