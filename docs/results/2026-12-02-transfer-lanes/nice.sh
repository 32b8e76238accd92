#!/bin/bash
# usage: nice.sh OUT ROUNDS ; variants "compute_nice loop_nice"
out=$1; rounds=$2; mkdir -p $out; cd /work/main
for r in $(seq 1 $rounds); do
  for v in "0 19" "10 19" "10 0" "19 0"; do
    set -- $v
    name=r${r}_c$1_l$2
    GWX_COMPUTE_NICE=$1 /usr/bin/python3 tools/cluster_bench.py --exchange_bench /tmp/s42/eb_nice --methods "${METHOD:-topk:ratio=0.01}" --peers "" \
      --no_latency_probe --transport_bench "" --no_alone --event_loop_nice $2 $EXTRA --name $name --out_dir $out > $out/$name.log 2>&1
    echo "$name $(grep 'gradwire | topk' $out/$name.md | awk -F'|' '{print $7, $11, $12, $13}')"
  done
done
