#!/bin/bash
# A/B of the streaming threshold at n = 6553600 (DDP's 25 MiB bucket), pinned to core 1.
out=$1; mkdir -p $out
F='DecodeAverage4/(topk|approx_topk|randomk):ratio=0.(01|1)/6553600'
for r in 1 2 3; do
  for b in A B; do
    taskset -c 1 /tmp/s42/cb_$b --cold --benchmark_filter="$F" --benchmark_min_time=0.3 \
      --summary_json=$out/cold_r${r}_$b.json > $out/cold_r${r}_$b.txt 2>&1
  done
done
for b in A B; do
  taskset -c 1 /tmp/s42/cb_$b --benchmark_filter="$F" --benchmark_min_time=0.3 \
    --summary_json=$out/steady_$b.json > $out/steady_$b.txt 2>&1
done
