#!/bin/bash
cd /work/main
for r in 1 2 3; do
  for v in base first6; do
    if [ $v = base ]; then EB=bazel-bin/tools/exchange_bench; else EB=/tmp/eb6.sh; fi
    timeout 900 /usr/bin/python3 tools/cluster_bench.py --links 1gbit,2500mbit --iters 20 \
      --methods 'topk:ratio=0.01' --peers "" --no_latency_probe --transport_bench "" --no_alone \
      --exchange_bench $EB --timeline_dir /tmp/res2/tl-$v-$r --out_dir /tmp/res2/cb --name fb-$v-$r \
      > /tmp/res2/fb-$v-$r.txt 2>&1
  done
done
