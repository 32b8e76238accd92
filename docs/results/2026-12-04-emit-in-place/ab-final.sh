#!/bin/bash
F='^Encode/(topk|approx_topk):ratio=0.(1|01)/'
for r in 1 2; do
  for v in A B; do
    if [ $v = B ]; then bin=/tmp/cb_new; else bin=/tmp/cb_inplace; fi
    unset GW_INPLACE
    taskset -c 1 $bin --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 > /tmp/ab2.$v.$r.txt 2>&1
  done
done
