#!/bin/bash
# /tmp/eb-base: exchange_bench of 601d6d2; /tmp/eb-new: of this change (the working tree before its commit).
# Run 2026-12-07 23:36-23:44 UTC.
cd /work/main
for round in 1 2 3; do
for v in base new; do
  bin=/tmp/eb-$v
  /usr/bin/python3 tools/cluster_bench.py --exchange_bench $bin --out_dir /tmp/xr --name tf2-$v-$round --shaper tbf --profiles transformer --bucket_size_mb 4 --links 500mbit --iters 5 --warmup 1 --peers "" --methods 'approx_topk:ratio=0.001' --no_alone --no_latency_probe --transport_bench "" > /tmp/xr/tf2-$v-$round.log 2>&1
  /usr/bin/python3 tools/cluster_bench.py --exchange_bench $bin --out_dir /tmp/xr --name rd2-$v-$round --methods 'topk:ratio=0.01;approx_topk:ratio=0.01' --peers "" --no_alone --no_latency_probe --transport_bench "" > /tmp/xr/rd2-$v-$round.log 2>&1
  /usr/bin/python3 -c "
import json
for n in ['tf2','rd2']:
  d=json.load(open('/tmp/xr/%s-$v-$round.json'%n))
  for c in d['cases']:
    if c['method']!='none': print('$round $v', n, c['method'], c['iter_ms_median'], 'sync', c['sync_ms_median'], 'xfer', c['transfer_ms_median'], 'cpu', c['process_cpu_ms_median'])"
done; done
