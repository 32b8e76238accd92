#!/bin/bash
# The version-3 binary with the benchmark's frame placed so the values
# section is 64-byte aligned (a) or 24 mod 64 (m), alternated, 2 rounds.
for round in 1 2; do
  for b in m a; do
    if [ $b = a ]; then export GW_ALIGN_VALUES=1; else unset GW_ALIGN_VALUES; fi
    taskset -c 1 /tmp/codec_bench.v3align --cold \
      --benchmark_filter='^Encode/(topk:ratio=0\.1|approx_topk:ratio=0\.01)/' \
      --benchmark_min_time=0.2 --benchmark_repetitions=5 \
      --summary_json=/tmp/alab/$b-$round.json > /tmp/alab/$b-$round.txt 2>&1
  done
done
