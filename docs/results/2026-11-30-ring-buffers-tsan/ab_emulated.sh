#!/bin/bash
# A/B of the transport-only figures on 4 emulated hosts at 1 Gbit/s:
# Gloo's ring allreduce/allgatherv (before, 28e53aa^^ = e01060c) vs gradwire's own (after, 8d20020).
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    /usr/bin/python3 tools/cluster_bench.py --methods none --peers "" --no_alone --no_latency_probe \
      --iters 2 --warmup 1 --transport_bench /tmp/transport_bench_$v --transport_reps 5 \
      --out_dir /tmp/ab --name ab-$v-$i > /tmp/ab/ab-$v-$i.log 2>&1
    echo "== $v $i"; grep -E "allreduce ring|halving|density|allgatherv" /tmp/ab/ab-$v-$i.log | grep -v "^\[" | head -7
  done
done
