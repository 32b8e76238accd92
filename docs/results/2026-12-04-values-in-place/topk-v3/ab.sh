#!/bin/bash
# Alternates main with random-k in place (rk) and the version-3 top-k frame
# (v3), top-k and approximate top-k encode rows, 3 rounds.
for round in 1 2 3; do
  for b in rk v3; do
    taskset -c 1 /tmp/codec_bench.$b --cold --benchmark_filter='^Encode/(topk|approx_topk):ratio=0\.(1|01)/' \
      --benchmark_min_time=0.2 --benchmark_repetitions=5 \
      --summary_json=/tmp/tkab/$b-$round.json > /tmp/tkab/$b-$round.txt 2>&1
  done
done
