#!/bin/bash
# The README's run under htb-ack and htb-fair, alternating, $1 rounds (default 2).
set -euo pipefail
out=${OUT:-/tmp/ab_fair}
mkdir -p "$out"
for round in $(seq 1 "${1:-2}"); do
  for shaper in htb-ack htb-fair; do
    bash tools/benchmark.sh --name "readme-$shaper-$round" --out_dir "$out" --shaper "$shaper" \
      > "$out/readme-$shaper-$round.log" 2>&1
    echo "$(date -u +%H:%M:%S) round $round $shaper done"
  done
done
