#!/bin/bash
# The README's run three times, back to back, with the new defaults.
cd /work/main
for i in 1 2 3; do bash tools/benchmark.sh --name readme-$i --out_dir /tmp/s41/readme > /tmp/s41/readme-$i.log 2>&1; done
