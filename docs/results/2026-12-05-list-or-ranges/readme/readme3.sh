#!/bin/bash
# The README's run three times, back to back (759b654, 2026-12-05).
cd /work/main
mkdir -p /tmp/s80/readme
for i in 1 2 3; do
  bash tools/benchmark.sh --name readme-$i --out_dir /tmp/s80/readme > /tmp/s80/readme-$i.log 2>&1
done
