#!/bin/bash
# usage: ab.sh OUT ROUNDS METHOD BIN_A BIN_B ...
out=$1; rounds=$2; method=$3; shift 3
mkdir -p $out
cd /work/main
for r in $(seq 1 $rounds); do
  i=0
  for b in "$@"; do
    i=$((i+1))
    /usr/bin/python3 tools/cluster_bench.py --exchange_bench $b --methods "$method" --peers "" \
      --no_latency_probe --transport_bench "" --no_alone $EXTRA --name r${r}b${i} --out_dir $out > $out/r${r}b${i}.log 2>&1
    # cluster_bench wrote OUT/NAME/*.json then, OUT/NAME.json (one file, every case) since.
    if [ -f $out/r${r}b${i}.json ]; then
      got=$(/usr/bin/python3 -c 'import json, sys
print(" ".join("%s=%.1f" % (c["method"], c["iter_ms_median"]) for c in json.load(open(sys.argv[1]))["cases"] if c.get("system") == "gradwire"))' $out/r${r}b${i}.json)
    else
      got=$(grep -o '"iter_ms_median": [0-9.]*' $out/r${r}b${i}/*.json 2>/dev/null | head -3 | tr '\n' ' ')
    fi
    echo "round $r bin $i ($b): $got"
  done
done
