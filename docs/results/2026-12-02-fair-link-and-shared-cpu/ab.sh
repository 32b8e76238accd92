#!/bin/bash
# ab.sh FILTER NAME=BINARY NAME=BINARY: four alternating rounds of two codec_bench binaries,
# --cold on core 1, printing each run's vs_memcpy table under "== NAME ROUND".
# paired-memcpy-ab.txt: FILTER '(Encode/(topk:ratio=0.1|qsgd:bits=(6|8),bucket=512)/25600000|
#   DecodeAverage4/(approx_topk|topk):ratio=0.1/1048576)', old= HEAD's, new= paired-memcpy.diff's;
# prefetch-ab.txt: FILTER 'DecodeAverage4/(approx_topk|topk|randomk):ratio=0.(1|01)/1048576',
#   base= HEAD's, pf= the prefetch's.
filter="$1"; shift
for r in 1 2 3 4; do
  for pair in "$@"; do
    echo "== ${pair%%=*} $r"
    taskset -c 1 "${pair#*=}" --cold --benchmark_filter="$filter" --benchmark_min_time=0.2 \
      --benchmark_color=false 2>&1 | grep -A12 "^vs_memcpy" | grep " / "
  done
done
