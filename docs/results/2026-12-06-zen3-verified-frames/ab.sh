#!/bin/bash
# usage: ab.sh FILTER ROUNDS label=cmd...   (each cmd is "ENV=.. binary")
filter=$1; rounds=$2; shift 2
for i in $(seq $rounds); do
  for spec in "$@"; do
    label=${spec%%=*}; cmd=${spec#*=}
    env $cmd --cold --benchmark_min_time=0.2 --benchmark_filter="$filter" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^(Decode|Encode)' | awk -v l=$label '{printf "%s %s %s %s\n", l, $1, $2, $NF}'
  done
done
