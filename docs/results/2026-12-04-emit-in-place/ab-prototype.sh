#!/bin/bash
F='^Encode/(topk|approx_topk):ratio=0.(1|01)/'
for r in 1 2 3; do
  for v in A B; do
    if [ $v = B ]; then export GW_INPLACE=1; else unset GW_INPLACE; fi
    taskset -c 1 /tmp/cb_inplace --cold --benchmark_filter="$F" --benchmark_min_time=0.2 --benchmark_repetitions=5 2>&1 | sed -n '/^vs_memcpy/,$p' > /tmp/ab_inplace.$v.$r.txt
  done
done
