#!/bin/bash
# Three processes of the rows near issue 18's codec bar, each printing both
# vs_memcpy (paired) and vs_memcpy_apart. Usage: pairs.sh OUT_PREFIX CODEC_BENCH
# (writes OUT_PREFIX.1.json .. .3.json: console text, despite the name;
# stored here as pairs-1.txt .. pairs-3.txt)
out=$1; bin=$2
for i in 1 2 3; do
  taskset -c 1 $bin --cold --benchmark_min_time=0.2 \
    --benchmark_filter='^(Encode|DecodeAverage4)/((topk|approx_topk|randomk):ratio=0.1|none|qsgd:bits=6,bucket=512|qsgd:bits=8,bucket=512)/' \
    --benchmark_format=json > $out.$i.json 2>/dev/null
done
