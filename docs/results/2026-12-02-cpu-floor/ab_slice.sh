#!/bin/bash
# The binary: bazel build -c opt //tools:exchange_bench with comm_slice.diff applied, copied to
# /tmp/s41/exchange_bench_x (the diff reads XSLICE_US_COMM / XSLICE_US_COMPUTE from the environment).
# Alternating A/B: the comm thread's EEVDF slice left alone vs 200 us.
cd /work/main
run() { env "$@" /usr/bin/python3 tools/cluster_bench.py --exchange_bench /tmp/s41/exchange_bench_x --methods 'topk:ratio=0.01' --peers "" --no_latency_probe --transport_bench "" --no_alone --name x --out_dir /tmp/s41/sl 2>&1 | grep -E "^resnet50.*topk" | cut -c60-110; }
for r in 1 2 3 4 5; do echo "none $(run A=1)"; echo "comm200 $(run XSLICE_US_COMM=200)"; done
