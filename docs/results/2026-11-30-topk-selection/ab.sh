#!/bin/bash
# usage: ab.sh ROUNDS FILTER bin...   -> median time and vs_memcpy per bin and benchmark
r=$1; f=$2; shift 2
out=${AB_DIR:-/tmp/ab}/ab.out; : > $out
for i in $(seq $r); do
  for b in "$@"; do
    taskset -c 1 ${AB_DIR:-/tmp/ab}/$b --cold --benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_filter="$f" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "^(Encode|Decode)" | grep -v "_mean\|_median\|_stddev\|_cv" | awk -v b=$b '{print b, $1, $2, $NF}' >> $out
  done
done
python3 - "$out" <<'PY'
import sys, statistics, collections
d=collections.defaultdict(list)
for line in open(sys.argv[1]):
    b,name,t,v=line.split(); d[(name,b)].append((float(t),float(v)))
for (name,b),xs in sorted(d.items()):
    print(f"{name:70s} {b:6s} n={len(xs):2d} t_med={statistics.median(x[0] for x in xs):7.2f} vs_med={statistics.median(x[1] for x in xs):.3f} min/max vs={min(x[1] for x in xs):.3f}/{max(x[1] for x in xs):.3f}")
PY
