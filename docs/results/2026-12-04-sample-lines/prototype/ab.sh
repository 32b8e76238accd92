#!/bin/bash
F='^Encode/(topk|approx_topk):ratio=0.(1|01)/'
for r in 1 2 3; do
  for v in A B; do
    if [ $v = B ]; then export GW_CLUSTER=1; else unset GW_CLUSTER; fi
    taskset -c 1 /tmp/cb_cluster --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 > /tmp/abc/$v.$r.txt 2>&1
  done
done
echo done > /tmp/abc/finished
