#!/bin/bash
# usage: var.sh OUT ROUNDS "NAME|ENV|FLAGS" ...
out=$1; rounds=$2; shift 2
mkdir -p $out
cd /work/main
B=${BIN:-/work/main/bazel-bin/tools/exchange_bench}
for r in $(seq 1 $rounds); do
  for v in "$@"; do
    IFS='|' read -r name envs flags <<< "$v"
    env X=1 $envs /usr/bin/python3 tools/cluster_bench.py --exchange_bench $B --methods "${METHODS:-topk:ratio=0.01}" --peers "" \
      --no_latency_probe --transport_bench "" --no_alone $flags --name r${r}$name --out_dir $out \
      --timeline_dir $out/tl-r${r}$name > $out/r${r}$name.log 2>&1
    got=$(/usr/bin/python3 -c 'import json, sys
print(" ".join("%s=%.1f(sync %.1f cpu %.1f)" % (c["method"], c["iter_ms_median"], c.get("sync_ms_median", -1), c.get("process_cpu_ms_median") or -1) for c in json.load(open(sys.argv[1]))["cases"] if c.get("system") == "gradwire" and c["method"] != "none"))' $out/r${r}$name.json)
    echo "round $r $name: $got"
  done
done
