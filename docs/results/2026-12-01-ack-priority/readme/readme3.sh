#!/bin/bash
set -euo pipefail
out=/tmp/readme3
mkdir -p $out
for i in 1 2 3; do
  bash tools/benchmark.sh --name readme-$i --out_dir $out > $out/readme-$i.log 2>&1
  echo "$(date -u +%H:%M:%S) run $i done"
done
