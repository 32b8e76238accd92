#!/bin/bash
cd /tmp/s83
for r in 1 2; do
  for R in 32 1000000000; do
    echo "=== round $r ratio $R $(date +%T)"
    GW_PREZERO_RATIO=$R taskset -c 1 ./cb_sweep --cold --benchmark_color=false --benchmark_filter='^DecodeAverage4/(topk:ratio=0\.00[0-9]*|approx_topk:ratio=0\.001)/25600000' --benchmark_min_time=0.2 2>&1 | grep -a "DecodeAverage4"
  done
done
echo DONE $(date +%T)
