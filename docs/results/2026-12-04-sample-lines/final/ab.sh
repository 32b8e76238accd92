#!/bin/bash
# A: HEAD (b625ca0), B: the sample in lines; alternated, pinned to core 1, caches cold
F='^Encode/(topk|approx_topk):ratio=0.(1|01|001)/'
for r in 1 2 3; do
  for v in A B; do
    if [ $v = B ]; then bin=/tmp/cb_lines; else bin=/tmp/cb_base; fi
    taskset -c 1 $bin --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 > /tmp/abl/$v.$r.txt 2>&1
  done
done
echo done > /tmp/abl/finished
