#!/bin/bash
# usage: nice.sh OUT ROUNDS NICE...
out=$1; rounds=$2; shift 2
mkdir -p $out
cd /work/main
B=/work/main/bazel-bin/tools/exchange_bench
for r in $(seq 1 $rounds); do
  for n in "$@"; do
    /usr/bin/python3 tools/cluster_bench.py --exchange_bench $B --methods "${METHODS:-topk:ratio=0.01}" --peers "" \
      --no_latency_probe --transport_bench "" --no_alone --event_loop_nice $n $EXTRA --name r${r}n${n} --out_dir $out \
      --timeline_dir $out/tl-r${r}n${n} > $out/r${r}n${n}.log 2>&1
    got=$(/usr/bin/python3 -c 'import json, sys
print(" ".join("%s=%.1f(sync %.1f)" % (c["method"], c["iter_ms_median"], c.get("sync_ms_median", -1)) for c in json.load(open(sys.argv[1]))["cases"] if c.get("system") == "gradwire" and c["method"] != "none"))' $out/r${r}n${n}.json)
    echo "round $r nice $n: $got"
  done
done
