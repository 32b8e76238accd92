#!/bin/bash
# usage: ab.sh FILTER ROUNDS "ENV=.. bin" "ENV=.. bin" ...; prints CPU ms per row
F=$1; R=$2; shift 2
for round in $(seq $R); do for c in "$@"; do printf "%-34s| " "$c"; taskset -c 1 env $c --cold --benchmark_min_time=0.3 --benchmark_filter="$F" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -E "^[A-Z][a-zA-Z0-9]*/" | awk '{printf "%7s ", $4}'; echo; done; done
