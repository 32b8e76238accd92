#!/bin/bash
cd /work/main
for i in 1 2; do
  for v in before seg18 after seg22; do
    /usr/bin/python3 tools/cluster_bench.py --methods none --peers "" --no_alone --no_latency_probe \
      --iters 2 --warmup 1 --transport_bench /tmp/transport_bench_$v --transport_reps 5 \
      --out_dir /tmp/ab --name seg-$v-$i > /tmp/ab/seg-$v-$i.log 2>&1
    echo "== $v $i $(grep -E "allreduce ring" /tmp/ab/seg-$v-$i.log | head -1)"
  done
done
