#!/bin/bash
F='^Encode/(topk|approx_topk):ratio=0.(1|01)/1048576'
for r in 1 2 3; do
  for v in A B C; do
    case $v in A) unset GW_CLUSTER;; B) export GW_CLUSTER=1;; C) export GW_CLUSTER=2;; esac
    taskset -c 1 /tmp/cb_cluster2 --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 > /tmp/abc2/$v.$r.txt 2>&1
  done
done
echo done > /tmp/abc2/finished
