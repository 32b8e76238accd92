#!/bin/bash
# usage: env.sh OUT ROUNDS "NAME:ENV..." ...
out=$1; rounds=$2; shift 2
mkdir -p $out
cd /work/main
B=/work/main/bazel-bin/tools/exchange_bench
for r in $(seq 1 $rounds); do
  for v in "$@"; do
    name=${v%%:*}; envs=${v#*:}
    env $envs /usr/bin/python3 tools/cluster_bench.py --exchange_bench $B --methods "${METHODS:-topk:ratio=0.01}" --peers "" \
      --no_latency_probe --transport_bench "" --no_alone $EXTRA --name r${r}$name --out_dir $out \
      --timeline_dir $out/tl-r${r}$name > $out/r${r}$name.log 2>&1
    got=$(/usr/bin/python3 -c 'import json, sys
print(" ".join("%s=%.1f(sync %.1f)" % (c["method"], c["iter_ms_median"], c.get("sync_ms_median", -1)) for c in json.load(open(sys.argv[1]))["cases"] if c.get("system") == "gradwire" and c["method"] != "none"))' $out/r${r}$name.json)
    echo "round $r $name: $got"
  done
done
