#!/bin/bash
# One line per benchmark row: each run's median "ms/vs_memcpy", labelled by
# file (A.1 = binary A, round 1). Usage: summarize.sh DIR (the A/B's output
# folder: [ABC].N.txt from codec_bench).
cd "${1:?usage: summarize.sh DIR}" || exit 1
for f in [ABC].*.txt; do sed 's/\x1b\[[0-9;]*m//g' $f | grep _median | awk -v f=$f '{sub("/real_time_median","",$1); print $1, f, $2, $NF}'; done | sort -k1,1 -k2,2 | awk '{if($1!=p){printf "\n%-42s",$1;p=$1} printf " %s:%s/%.3f", substr($2,1,3), $3, $4}'; echo
