#!/bin/bash
F='^Encode/(topk|approx_topk):ratio=0.1/1048576'
for r in 1 2 3; do
  for v in A B; do
    if [ $v = B ]; then bin=/tmp/cb_s2048; else bin=/tmp/cb_base64; fi
    taskset -c 1 $bin --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 2>&1 | sed 's/\x1b\[[0-9;]*m//g' > /tmp/ab3.$v.$r.txt
  done
done
