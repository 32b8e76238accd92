#!/bin/bash
# alternate bbr/cubic; P=2 1% case of fair_link_exchange_test
cd /work/main
for r in 1 2 3 4 5 6 7 8; do
  for cc in bbr cubic; do
    sysctl -qw net.ipv4.tcp_congestion_control=$cc
    out=/tmp/ccab/$cc-$r
    /usr/bin/python3 tools/scaling_bench.py --out $out --hosts 2 --link 20mbit --elements 4194304 \
      --buckets 1 --densities 0.01 --iters 5 --warmup 1 --skip_dense --shaper htb-fair \
      --rank_binary bazel-bin/tools/scaling_rank > $out.log 2>&1
    python3 - $out/scaling.json $cc <<'PY'
import json,sys
for c in json.load(open(sys.argv[1]))["cases"]:
    print(sys.argv[2], c["exchange"], round(c["transfer_ms_median"],1), [round(x) for x in c["transfer_ms_all"]])
PY
  done
done
sysctl -qw net.ipv4.tcp_congestion_control=bbr
