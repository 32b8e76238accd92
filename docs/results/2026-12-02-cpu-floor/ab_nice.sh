#!/bin/bash
# Alternating: Gloo's event-loop thread at nice 19 (cluster_bench's default), 10 and 0.
# The binary: bazel build -c opt //tools:exchange_bench at da9c15b, copied to /tmp/s41/exchange_bench_main.
cd /work/main
run() { /usr/bin/python3 tools/cluster_bench.py --exchange_bench /tmp/s41/exchange_bench_main --methods 'topk:ratio=0.01' --peers "" --no_latency_probe --transport_bench "" --no_alone --event_loop_nice $1 --name nice$1-$2 --out_dir /tmp/s41/nice 2>&1 | grep -E "^resnet50.*topk" | cut -c60-110; }
for r in 1 2 3 4; do for n in 19 10 0; do echo "nice$n $(run $n $r)"; done; done
