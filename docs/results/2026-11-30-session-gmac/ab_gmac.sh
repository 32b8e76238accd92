#!/bin/bash
# A/B of the frame MAC: base (76a0982, HMAC-SHA256 frames) vs gmac (session GMAC frames),
# alternating, README cluster (4 emulated hosts, 1 Gbit/s), top-k 1 % and approx top-k 1 %.
cd /work/main
for round in 1 2 3; do
  for b in base gmac; do
    /usr/bin/python3 tools/cluster_bench.py --exchange_bench /tmp/s25/exchange_bench_$b \
      --methods 'topk:ratio=0.01;approx_topk:ratio=0.01' --peers '' --transport_bench '' --no_alone \
      --name ab-$b-$round --out_dir /tmp/s25/ab > /tmp/s25/ab/ab-$b-$round.log 2>&1
    /usr/bin/python3 -c "
import json;d=json.load(open('/tmp/s25/ab/ab-$b-$round.json'))
for c in d['cases']:
  print('$b', $round, c['method'], 'iter', c['iter_ms_median'], 'auth', c['auth_ms_median'], 'compr', c['compress_ms_median'], 'cpu', c['process_cpu_ms_median'])"
  done
done
