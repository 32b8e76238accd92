#!/bin/bash
# The README's run three times, back to back (931351a, 2026-12-02 15:37-15:45 UTC).
cd /work/main
mkdir -p /tmp/s47/readme
for i in 1 2 3; do
  bash tools/benchmark.sh --name readme-$i --out_dir /tmp/s47/readme > /tmp/s47/readme-$i.log 2>&1
done
