#!/bin/bash
# usage: ab2.sh FILTER ROUNDS label=ARGS...   (one binary, /tmp/cb_auth, extra args per label)
filter=$1; rounds=$2; shift 2
for i in $(seq $rounds); do
  for spec in "$@"; do
    label=${spec%%=*}; args=${spec#*=}
    /tmp/cb_auth --cold --benchmark_min_time=0.2 --benchmark_filter="$filter" $args 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^(Decode|Encode)' | awk -v l=$label -v r=$i '{printf "%s r%s %s %s %s\n", l, r, $1, $2, $NF}'
  done
done
