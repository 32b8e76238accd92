#!/bin/bash
# Alternates the base and new codec_bench, random-k encode rows, 3 rounds.
for round in 1 2 3; do
  for b in base new; do
    taskset -c 1 /tmp/codec_bench.$b --cold --benchmark_filter='^Encode/randomk:' \
      --benchmark_min_time=0.2 --benchmark_repetitions=5 \
      --summary_json=/tmp/rkab/$b-$round.json > /tmp/rkab/$b-$round.txt 2>&1
  done
done
